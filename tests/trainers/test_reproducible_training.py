"""A training result is a function of what its record holds: the same settings, seed, thread count and
deterministic switch give bit-identical weights, and ``--jobs`` (how many runs at once) changes no record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml

from dare.trainers.cli import main

SFT = ["--algo", "sft", "--model", "tiny-sdar", "--suite", "sudoku", "--steps", "20", "--no-eval",
       "--set", "prompts_per_step=2", "--set", "micro_batch_size=2", "--set", "lr=1e-3", "--set", "save_every=20"]
# Per-run facts that differ between any two runs (clocks, names with a time in them, CPU seconds)
VOLATILE = {"run_id", "created_at", "finished_at", "timing", "latency_s", "cpu_s", "time", "cpu_seconds", "command",
            "git_dirty"}


def _weights(run: Path) -> bytes:
    (final,) = sorted((run / "checkpoints").glob("step-*"))[-1:]
    return b"".join(f.read_bytes() for f in sorted(final.glob("*.safetensors")))


def _train(out: Path, *extra: str) -> Path:
    assert main([*SFT, "--out", str(out), *extra]) == 0
    (run,) = out.iterdir()
    return run


@pytest.fixture
def keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_twenty_sft_steps_give_bit_identical_weights_twice(tmp_path, keep_threads):
    first, second = _train(tmp_path / "a"), _train(tmp_path / "b")
    assert _weights(first) == _weights(second)
    (start,) = json.loads((first / "environment.json").read_text())  # what the weights are a function of
    assert start["from_step"] == 0 and start["torch_threads"] == torch.get_num_threads()
    assert start["deterministic_algorithms"] is False and start["torch"] == torch.__version__
    assert json.loads((second / "environment.json").read_text()) == [start]


def test_thread_count_and_deterministic_switch_are_applied_and_recorded(tmp_path, keep_threads):
    run = _train(tmp_path / "a", "--set", "threads=2", "--set", "deterministic=true", "--steps", "2",
                 "--set", "save_every=2")
    (entry,) = json.loads((run / "environment.json").read_text())
    assert entry["torch_threads"] == 2 and entry["deterministic_algorithms"] is True
    assert torch.get_num_threads() == 2
    torch.use_deterministic_algorithms(False)
    # the switches are execution settings: the same run resumes under others, and says so per restart
    assert main([*SFT, "--out", str(tmp_path / "a"), "--steps", "3", "--set", "save_every=1",
                 "--set", "threads=1"]) == 0
    entries = json.loads((run / "environment.json").read_text())
    assert [(e["from_step"], e["torch_threads"]) for e in entries] == [(0, 2), (2, 1)]


def _normalised(value, out: Path):
    """The record with the per-run facts dropped and the output folder's path replaced by OUT."""
    if isinstance(value, dict):
        return {k: _normalised(v, out) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_normalised(v, out) for v in value]
    if isinstance(value, str):  # run ids begin with their creation time
        return re.sub(r"\d{8}T\d{6}", "TIME", value.replace(str(out), "OUT"))
    return value


def _records(out: Path) -> dict[str, object]:
    """Every run.json, samples.jsonl and the comparison summary under ``out``, keyed by the run's folder."""
    found: dict[str, object] = {}
    for record in sorted(out.rglob("run.json")):
        key = str(record.parent.parent.relative_to(out))  # .../eval/<timestamped run id>/run.json
        found[key] = _normalised(json.loads(record.read_text()), out)
        rows = [json.loads(line) for line in (record.parent / "samples.jsonl").read_text().splitlines()]
        found[key + "/samples"] = _normalised(rows, out)
    found["comparison"] = _normalised(json.loads((out / "comparison.json").read_text()), out)
    return found


@pytest.mark.slow
def test_jobs_one_and_two_give_identical_records(tmp_path, keep_threads):
    """The same tiny comparison with ``--jobs 1`` (in this process) and ``--jobs 2`` (two processes)."""
    train = {"suite": "sudoku", "steps": 2, "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 4,
             "eval_limit": 6, "lr": 1.0e-3, "decoding": {"gen_length": 8, "steps": 8, "block_length": 4},
             "rollout_decoding": {"temperature": 1.0}}
    config = tmp_path / "compare.yaml"
    config.write_text(yaml.safe_dump({"kind": "comparison", "start": {"model": "tiny-sdar"}, "train": train,
                                      "runs": [{"algorithm": "dipo"}, {"algorithm": "d1"}]}))
    outs = {jobs: tmp_path / f"jobs{jobs}" for jobs in (1, 2)}
    for jobs, out in outs.items():
        torch.set_num_threads(2)  # the comparison pins its own thread count whatever the caller's
        assert main(["--compare", str(config), "--out", str(out), "--jobs", str(jobs)]) == 0
    one, two = (_records(out) for out in outs.values())
    assert one.keys() == two.keys() and len([k for k in one if not k.endswith("samples")]) == 4
    for key in one:
        assert one[key] == two[key], key
    for name in ("dipo", "d1"):
        assert _weights(outs[1] / "runs" / name) == _weights(outs[2] / "runs" / name)
        env = json.loads((outs[2] / "runs" / name / "environment.json").read_text())
        assert env[0]["torch_threads"] == 1  # the comparison's default: one thread per run


def test_every_run_record_names_the_execution_facts(keep_threads):
    from dare.harness.rundir import environment_info

    torch.set_num_threads(1)
    env = environment_info()
    assert env["torch_threads"] == 1 and env["deterministic_algorithms"] is False
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and "cpu" in env
