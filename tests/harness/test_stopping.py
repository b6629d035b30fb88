"""Preemption of dare-eval: SIGTERM or Ctrl-C at seeded points of a real run; the rerun's samples.jsonl is
byte for byte the undisturbed run's, nothing generated is lost and nothing is generated twice."""

from __future__ import annotations

import json
import random
import signal
import sys
from pathlib import Path

import pytest

from ..stops import jsonl_keys, signal_when
from .helpers import dare_eval, generated_count
from .plugin_fixture import make_plugin

TOTAL, BATCH, DELAY = 24, 4, 0.3
GRACE_S = 20.0


def _args(out: Path, counter: Path, delay: float = DELAY) -> list[str]:
    return ["--backend", "sudoku-solver", "--model", "solver", "--suite", "sudoku", "--limit", str(TOTAL),
            "--out", str(out), "--set", f"batch_size={BATCH}", "--set", f"engine.counter={counter}",
            "--set", f"engine.delay={delay}"]


def _cmd(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "dare.harness.cli", "--no-progress", *args]


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> dict:
    return {"PYTHONPATH": str(make_plugin(tmp_path_factory.mktemp("plugin") / "site"))}


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory, plugin) -> bytes:
    """samples.jsonl of a run nobody signalled (the counter and delay are options of the same engine, so
    the one generation key is shared; the cache is its own)."""
    root = tmp_path_factory.mktemp("undisturbed")
    proc = dare_eval(*_args(root / "runs", root / "counter.txt", delay=0), env=plugin)
    assert proc.returncode == 0, proc.stderr
    return (Path(proc.stdout.strip().splitlines()[-1]) / "samples.jsonl").read_bytes()


def _rerun_is_identical(args: list[str], plugin: dict, undisturbed: bytes, cached: int) -> dict:
    proc = dare_eval(*args, env=plugin)
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "complete" and not any(f.startswith("stopped=") for f in record["flags"])
    counts = record["counts"]["sudoku"]
    assert counts["cached"] == cached and counts["generated"] == TOTAL - cached  # nothing made twice
    assert (run_dir / "samples.jsonl").read_bytes() == undisturbed
    return record


def stop_trial(tmp_path: Path, plugin: dict, undisturbed: bytes, seed: int, signals: list[int]) -> float:
    """One seeded trial: signal after a random number of finished batches, at a random moment of the next."""
    rng = random.Random(seed)
    counter, out = tmp_path / "counter.txt", tmp_path / "runs"
    args = _args(out, counter)
    after = rng.randrange(1, TOTAL // BATCH - 1) * BATCH
    stop = signal_when(_cmd(args), lambda: generated_count(counter) >= after, signals, env=plugin,
                       after_s=rng.uniform(0, DELAY))
    made = generated_count(counter)
    keys = jsonl_keys(out / ".cache" / "generations")
    assert len(keys) == len(set(keys)), "a generation was cached twice"
    lines = [line for line in stop.stderr.splitlines() if line.strip()]
    assert "Traceback" not in stop.stderr, stop.stderr
    assert lines[-1].endswith("rerun the same command to resume; partial results in "
                              + lines[-1].rsplit("partial results in ", 1)[-1])
    name = signal.Signals(signals[0]).name
    if stop.returncode == 75:  # the batch in flight finished and was cached: nothing generated is lost
        # (with two signals: the stop was done before the second arrived, which then found nothing to stop)
        assert lines[-1].startswith(f"dare-eval: stopped by {name} ") and len(keys) == made < TOTAL
        record = json.loads((Path(lines[-1].rsplit("partial results in ", 1)[1]) / "run.json").read_text())
        assert record["status"] == "partial" and f"stopped={name}" in record["flags"]
        assert record["metrics"]["sudoku"]["accuracy"]["n"] == made  # everything cached is scored
    else:  # at once: only the batch in flight is lost
        assert len(signals) == 2, stop.stderr
        # 128 + the signal that stopped it; two that arrive while the run is in a native call are handled together
        assert stop.returncode in {128 + s for s in signals}, stop.stderr
        assert "stopped at once by a second signal" in lines[-1]
        assert made - BATCH <= len(keys) <= made < TOTAL
    assert stop.exit_s < GRACE_S, stop.exit_s  # well within the grace period
    _rerun_is_identical(args, plugin, undisturbed, len(keys))
    return stop.exit_s


def test_sigterm_stops_at_a_safe_point_and_the_rerun_is_identical(tmp_path, plugin, undisturbed):
    stop_trial(tmp_path, plugin, undisturbed, 0, [signal.SIGTERM])


@pytest.mark.extended
def test_a_second_signal_stops_at_once_losing_only_the_batch_in_flight(tmp_path, plugin, undisturbed):
    stop_trial(tmp_path, plugin, undisturbed, 1, [signal.SIGTERM, signal.SIGINT])


@pytest.mark.extended
def test_a_batch_longer_than_the_grace_period_is_dropped_when_it_ends(tmp_path, plugin):
    counter = tmp_path / "counter.txt"
    args = [*_args(tmp_path / "runs", counter, delay=8.0), "--grace", "1"]
    stop = signal_when(_cmd(args), lambda: (tmp_path / "runs" / ".cache").is_dir(), [signal.SIGTERM], env=plugin,
                       after_s=0.5)
    assert stop.returncode == 128 + signal.SIGTERM, stop.stderr
    assert "stopped at once by the 1 s grace period after SIGTERM is over" in stop.stderr
    assert 1.0 <= stop.exit_s < 6.0, stop.exit_s  # at the end of the grace, not of the 8 s batch
    assert generated_count(counter) == 0 and jsonl_keys(tmp_path / "runs" / ".cache" / "generations") == []


@pytest.mark.slow
@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGINT], [signal.SIGTERM, signal.SIGTERM]],
                         ids=["sigterm", "sigint", "twice"])
def test_twenty_seeded_stops(tmp_path, plugin, undisturbed, signals):
    times = [stop_trial(tmp_path / str(seed), plugin, undisturbed, 100 + seed, signals) for seed in range(20)]
    print(f"signal to exit, {signals}: min {min(times):.2f} s, max {max(times):.2f} s, grace {GRACE_S:g} s")


def test_reclaim_takes_sigterm_back_from_a_library_that_replaced_the_handler():
    """``ray.init`` sets its own SIGTERM handler (exit at once); after ``stopping.reclaim()`` a SIGTERM only
    marks the run as stopping again, and outside ``graceful()`` reclaim touches nothing."""
    import os

    from dare.harness import stopping

    def theirs(signum, frame):
        raise AssertionError("the library's handler ran")

    with stopping.graceful(30):
        signal.signal(signal.SIGTERM, theirs)
        stopping.reclaim()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopping.requested()
    signal.signal(signal.SIGTERM, theirs)
    stopping.reclaim()
    assert signal.getsignal(signal.SIGTERM) is theirs
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
