"""dare-eval --workers 2 under a seeded kill schedule: every dead worker is replaced, its shard runs again, and the
run is the undisturbed run byte for byte; past the restart budget the run stops in one line and a rerun resumes.

Each trial SIGKILLs one or two replica processes at seeded points of a real run (before the first batch or after
a batch is cached; at once, or a seeded moment into the next batch, while its shards are being decoded) on the
module's local Ray cluster.
"""

from __future__ import annotations

import gc
import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from dare.harness import cli, parallel  # noqa: E402

from .ray_logs import ray_complaints  # noqa: E402

pytestmark = pytest.mark.timeout(900)
LIMIT, BATCH = 8, 2
BATCHES = LIMIT // BATCH
ARGS = ["--model", "tiny-llada", "--suite", "sudoku", "--limit", str(LIMIT), "--workers", "2",
        "--set", f"batch_size={BATCH}"]
TRIALS = 20


class _Quiet:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


class KillSchedule:
    """The run's progress bar (made before the first batch, updated after each cached batch) doubles as the
    clock: at point p (0: before batch 1; p: batch p cached) it SIGKILLs a live worker that was not killed
    before, at once or ``delay`` seconds later from a thread (so the kill lands while batch p+1 decodes)."""

    def __init__(self, kills: dict[int, tuple[int, float]]):
        self.kills, self.point, self.bars = kills, 0, 0
        self.killed: list[int] = []
        self.landed: list[tuple[int, bool]] = []  # (progress point read once the process is dead, delayed)
        self.threads: list[threading.Thread] = []
        self.engine: parallel.ParallelEngine | None = None

    def bar(self, desc: str, total: int) -> KillSchedule | _Quiet:
        self.bars += 1
        if self.bars > 1:  # the clock is the generation bar; the verification bar after it moves nothing
            return _Quiet()
        # exactly one engine, or an earlier run leaked its workers (type(), as isinstance() on every object
        # touches torch's deprecated reduce_op, whose warning would land in the captured stderr)
        gc.collect()
        [self.engine] = [o for o in gc.get_objects() if type(o) is parallel.ParallelEngine]
        self._at(0)
        return self

    def update(self, n: int) -> None:
        self.point += 1
        self._at(self.point)

    def close(self) -> None:
        for t in self.threads:
            t.join()
        self.engine = None  # monkeypatch keeps every bar factory it replaced: none may keep a run's engine

    def _at(self, point: int) -> None:
        if point not in self.kills:
            return
        for t in self.threads:  # an earlier delayed kill has landed before this one picks its victim
            t.join()
        pick, delay = self.kills[point]
        live = [p for p in self.engine.worker_pids() if p not in self.killed]
        victim = live[pick % len(live)]
        self.killed.append(victim)
        if delay == 0:
            self._kill(victim, delayed=False)
            return
        thread = threading.Thread(target=lambda: (time.sleep(delay), self._kill(victim, delayed=True)))
        thread.start()
        self.threads.append(thread)

    def _kill(self, victim: int, delayed: bool) -> None:
        os.kill(victim, signal.SIGKILL)
        self.landed.append((self.point, delayed))

    def restarts(self) -> range:
        """The restarts the run may count. A kill at a progress point lands before the next batch is sent, so it
        is always seen; so is a delayed kill that landed at point p <= BATCHES - 2, as batch p + 2 is sent after
        it (the bar moves before a batch is sent, and p is read once the process is dead). A delayed kill that
        landed in the last batch, or after it, may find the worker's shard answered and the worker never called
        again: nothing to replace (on a fast machine a 0.4 s delay outlasts the two batches left after point 2)."""
        sure = sum(not delayed or p <= BATCHES - 2 for p, delayed in self.landed)
        return range(sure, len(self.landed) + 1)


def schedule(trial: int) -> dict[int, tuple[int, float]]:
    """One or two kills at distinct seeded points; a delayed kill only where a later batch is sure to find the
    worker dead should it land after its batch finished (so every kill is seen and counted)."""
    rng = random.Random(f"worker-kill-{trial}")
    points = sorted(rng.sample(range(BATCHES), rng.choice((1, 1, 2))))
    return {p: (rng.randrange(2), rng.choice((0.0, round(rng.uniform(0.05, 0.4), 2))) if p < BATCHES - 1 else 0.0)
            for p in points}


def run_dir(out: Path) -> Path:
    return max((p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")),
               key=lambda p: p.stat().st_mtime)


def once_each(out: Path) -> None:
    """Zero lost, zero duplicated: each request generated, cached and verified exactly once, each row once."""
    rows = [json.loads(line) for line in (run_dir(out) / "samples.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["index"]) for r in rows) == sorted({(r["id"], r["index"]) for r in rows})
    assert len(rows) == LIMIT
    for cache in ("generations", "verdicts"):
        keys = [json.loads(line)["key"] for f in (out / ".cache" / cache).glob("*.jsonl")
                for line in f.read_text().splitlines()]
        assert len(keys) == len(set(keys)) == LIMIT, cache


@pytest.fixture(scope="module")
def undisturbed(ray_cluster, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("undisturbed")
    assert cli.main([*ARGS, "--out", str(out), "--no-progress"]) == 0
    return run_dir(out)


@pytest.mark.extended
def test_seeded_kills_are_replaced_and_the_run_is_the_undisturbed_one(undisturbed, tmp_path, monkeypatch, caplog):
    expected = (undisturbed / "samples.jsonl").read_bytes()
    seconds, restarts = [], 0
    for trial in range(TRIALS):
        kills = KillSchedule(schedule(trial))
        monkeypatch.setattr(cli, "progress_bars", lambda enabled, kills=kills: kills.bar)
        out = tmp_path / f"trial{trial}"
        started = time.monotonic()
        assert cli.main([*ARGS, "--out", str(out)]) == 0, (trial, kills.kills, ray_complaints())
        seconds.append(time.monotonic() - started)
        record = json.loads((run_dir(out) / "run.json").read_text())
        assert (run_dir(out) / "samples.jsonl").read_bytes() == expected, (trial, kills.kills)
        once_each(out)
        assert record["counts"]["sudoku"]["generated"] == LIMIT and record["status"] == "complete"
        counted = record["execution"]["worker_restarts"]
        assert record["execution"] == {"workers": 2, "worker_restart_budget": 3, "worker_restarts": counted}
        assert len(kills.landed) == len(kills.kills) and counted in kills.restarts(), (trial, kills.kills, kills.landed)
        replaced = [r for r in caplog.records if "replacing it" in r.getMessage()]  # one warning per restart
        assert len(replaced) == counted and all(r.levelname == "WARNING" for r in replaced), replaced
        caplog.clear()
        restarts += counted
    print(f"\n{TRIALS} trials, {restarts} restarts, {min(seconds):.1f}-{max(seconds):.1f} s a trial "
          f"(mean {sum(seconds) / len(seconds):.1f} s)")


@pytest.mark.extended
def test_past_the_budget_one_line_cache_kept_and_rerun_identical(undisturbed, tmp_path, monkeypatch, capfd):
    kills = KillSchedule({1: (0, 0.0), 2: (0, 0.0)})  # two deaths, one restart allowed
    monkeypatch.setattr(cli, "progress_bars", lambda enabled: kills.bar)
    args = [*ARGS, "--out", str(tmp_path), "--worker-restarts", "1"]
    assert cli.main(args) == 1
    err = [line for line in capfd.readouterr().err.splitlines() if "replacing it" not in line]
    assert len(err) == 1 and "restart budget is spent (1 of 1" in err[0] and "rerun the same command" in err[0], \
        (err, ray_complaints())
    partial = json.loads((run_dir(tmp_path) / "run.json").read_text())
    assert partial["status"] == "partial" and partial["execution"]["worker_restarts"] == 1
    assert partial["counts"]["sudoku"]["generated"] == 2 * BATCH  # batches 1 and 2 were cached before the 2nd death

    monkeypatch.setattr(cli, "progress_bars", lambda enabled: None)
    assert cli.main(args) == 0
    counts = json.loads((run_dir(tmp_path) / "run.json").read_text())["counts"]["sudoku"]
    assert counts["cached"] == 2 * BATCH and counts["generated"] == LIMIT - 2 * BATCH
    assert (run_dir(tmp_path) / "samples.jsonl").read_bytes() == (undisturbed / "samples.jsonl").read_bytes()
    once_each(tmp_path)

