"""``dare-eval --backend opencompass`` runs through DARE's runner: a run killed with SIGKILL resumes from the
generation cache, and a second process on the same ``--out`` is refused (exit 2), as for the native engines
(tests/harness/test_resume_and_plugins.py, tests/harness/test_rundir_lock.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("opencompass")

from ..harness.helpers import dare_eval, run_record, write_completions  # noqa: E402
from ..harness.plugin_fixture import make_plugin  # noqa: E402
from ..harness.test_rundir_lock import _held  # noqa: E402

OPENCOMPASS = ["--backend", "opencompass", "--set", "engine.via=sudoku-solver", "--model", "solver",
               "--suite", "sudoku"]


def _count(counter) -> int:
    return sum(int(x) for x in counter.read_text().split()) if counter.exists() else 0


def test_kill_9_then_rerun_regenerates_nothing_finished_through_opencompass(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(make_plugin(tmp_path / "site"))}
    counter = tmp_path / "generated.txt"
    out = tmp_path / "runs"
    args = [*OPENCOMPASS, "--limit", "60", "--out", str(out), "--set", "batch_size=4",
            "--set", f"engine.counter={counter}"]
    proc = subprocess.Popen([sys.executable, "-m", "dare.harness.cli", "--no-progress", *args,
                             "--set", "engine.delay=0.15"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _count(counter) < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before_kill = _count(counter)
    assert 12 <= before_kill < 60, before_kill
    cache_lines = sum(len(p.read_text().splitlines()) for p in (out / ".cache" / "generations").glob("*.jsonl"))
    assert cache_lines >= before_kill - 4  # at most the batch in flight is lost

    resumed = dare_eval(*args, env={"PYTHONPATH": env["PYTHONPATH"]})
    run_dir, record = run_record(resumed)
    regenerated = _count(counter) - before_kill
    counts = record["counts"]["sudoku"]
    assert counts["cached"] + counts["generated"] == 60
    assert counts["generated"] == regenerated  # the engine was asked only for what the cache lacked
    assert counts["cached"] >= before_kill - 4, counts
    assert regenerated <= 60 - (before_kill - 4)
    assert record["backend"]["name"] == "opencompass" and record["status"] == "complete"
    assert (run_dir / "opencompass" / "results" / "solver" / "dare-sudoku.json").is_file()  # OpenCompass scored it

    fresh = dare_eval(*args[:-4], "--out", str(tmp_path / "fresh"), env={"PYTHONPATH": env["PYTHONPATH"]})
    _, uninterrupted = run_record(fresh)
    assert record["metrics"] == uninterrupted["metrics"]
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 60 and len({s["id"] for s in samples}) == 60


def test_second_opencompass_run_on_the_same_out_exits_2_with_one_line(tmp_path):
    ids = ["sudoku/test/0", "sudoku/test/1", "sudoku/test/2"]
    completions = write_completions(tmp_path / "c.jsonl", [(i, "<answer>1</answer>") for i in ids])
    out = tmp_path / "runs"
    args = ["--backend", "opencompass", "--suite", "sudoku", "--completions", str(completions), "--limit", "3",
            "--out", str(out)]
    holder = _held(out)
    try:
        proc = dare_eval(*args)
    finally:
        holder.kill()
        holder.wait()
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "in use by another dare-eval" in lines[0] and "--out" in lines[0]
    assert not [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")], "no run directory made"
    _, record = run_record(dare_eval(*args))  # the lock died with its holder
    assert record["backend"]["name"] == "opencompass"
