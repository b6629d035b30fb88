"""Preemption of dare-train: SIGTERM or Ctrl-C at seeded points of a real run; the step in flight finishes
and is checkpointed (checkpoints are otherwise only written at the end here), and the rerun ends with the
undisturbed run's weights and metrics."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dare.trainers.cli import main

from ..stops import signal_when

STEPS, GRACE_S = 20, 20.0
RUN = "sft-sudoku-llada-s0"


def _args(model: Path, out: Path) -> list[str]:
    return ["--algo", "sft", "--model-path", str(model), "--suite", "sudoku", "--out", str(out), "--steps", str(STEPS),
            "--no-eval", "--no-progress", "--set", "prompts_per_step=1", "--set", "micro_batch_size=1",
            "--set", "decoding.gen_length=8", "--set", "decoding.steps=8", "--set", "decoding.block_length=4",
            "--set", "lr=1e-2", "--set", "save_every=100", "--set", "threads=1"]


def _cmd(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "dare.trainers.cli", *args]


def _rows(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in ("time", "cpu_s")} for x in lines]


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    final = run_dir / "checkpoints" / f"step-{STEPS:06d}"
    return {k: v for f in sorted(final.glob("*.safetensors")) for k, v in load_file(str(f)).items()}


def _steps_checkpointed(run_dir: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("step-*") if "." not in p.name)


@pytest.fixture(scope="module")
def undisturbed(tiny, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("undisturbed")
    assert main(_args(tiny["llada"], out)) == 0  # in this process: one interpreter start-up less
    return out / RUN


def stop_trial(tiny, tmp_path: Path, undisturbed: Path, seed: int, signals: list[int]) -> float:
    rng = random.Random(seed)
    args = _args(tiny["llada"], tmp_path)
    run_dir = tmp_path / RUN
    after = rng.randrange(1, 6)  # steps take tens of ms: early enough that many are left

    def steps_done() -> int:
        path = run_dir / "metrics.jsonl"
        return len(path.read_text().splitlines()) if path.is_file() else 0

    stop = signal_when(_cmd(args), lambda: steps_done() >= after, signals, after_s=rng.uniform(0, 0.05))
    assert "Traceback" not in stop.stderr and stop.returncode != 0, stop.stderr
    last = stop.stderr.strip().splitlines()[-1]
    assert last.endswith("rerun the same command to resume from the last checkpoint"), last
    name = signal.Signals(signals[0]).name
    if stop.returncode == 75:  # the step in flight finished and was checkpointed: no step is lost
        assert last.startswith(f"dare-train: stopped by {name} ")
        assert _steps_checkpointed(run_dir) == [steps_done()] and after <= steps_done() < STEPS
    else:
        assert len(signals) == 2, stop.stderr
        assert stop.returncode in {128 + s for s in signals}, stop.stderr
        assert "stopped at once by a second signal" in last
    assert stop.exit_s < GRACE_S, stop.exit_s
    rerun = subprocess.run(_cmd(args), capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert _rows(run_dir) == _rows(undisturbed)  # each step once, with the undisturbed run's values
    a, b = _weights(undisturbed), _weights(run_dir)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    return stop.exit_s


@pytest.mark.extended
def test_sigterm_checkpoints_the_step_in_flight_and_the_rerun_matches(tiny, tmp_path, undisturbed):
    stop_trial(tiny, tmp_path, undisturbed, 0, [signal.SIGTERM])


@pytest.mark.slow
@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGINT], [signal.SIGTERM, signal.SIGINT]],
                         ids=["sigterm", "sigint", "twice"])
def test_twenty_seeded_stops_of_training(tiny, tmp_path, undisturbed, signals):
    times = [stop_trial(tiny, tmp_path / str(seed), undisturbed, 100 + seed, signals) for seed in range(20)]
    print(f"signal to exit, {signals}: min {min(times):.2f} s, max {max(times):.2f} s, grace {GRACE_S:g} s")
