"""Third-party plugins through the entry-point group, and kill -9 / rerun resuming from the cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ..stops import default_signals
from .helpers import assert_resumed, dare_eval, generated_count, kill_9_mid_run, run_record
from .plugin_fixture import make_plugin


def test_plugin_engine_is_listed_and_runs(tmp_path):
    env = {"PYTHONPATH": str(make_plugin(tmp_path / "site"))}
    listing = dare_eval("--list", env=env)
    assert "sudoku-solver" in listing.stdout
    proc = dare_eval("--backend", "sudoku-solver", "--model", "solver", "--suite", "sudoku", "--limit", "20",
                     "--out", str(tmp_path / "runs"), env=env)
    _, record = run_record(proc)
    assert record["backend"]["name"] == "sudoku-solver"
    assert record["metrics"]["sudoku"]["accuracy"]["value"] == 1.0
    assert record["metrics"]["sudoku"]["accuracy"]["n"] == 20


def test_kill_9_then_rerun_regenerates_nothing_finished(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(make_plugin(tmp_path / "site"))}
    counter = tmp_path / "generated.txt"
    out = tmp_path / "runs"
    args = ["--backend", "sudoku-solver", "--model", "solver", "--suite", "sudoku", "--limit", "60", "--out", str(out),
            "--set", "batch_size=4", "--set", f"engine.counter={counter}"]
    # Interrupted run: killed with SIGKILL once a few batches are in the cache.
    before_kill = kill_9_mid_run(args, env, counter, out)

    resumed = dare_eval(*args, env={"PYTHONPATH": env["PYTHONPATH"]})
    _, record = run_record(resumed)
    assert_resumed(record, counter, before_kill)  # every finished sample came from the cache

    fresh = dare_eval(*args[:-4], "--out", str(tmp_path / "fresh"), env={"PYTHONPATH": env["PYTHONPATH"]})
    _, uninterrupted = run_record(fresh)
    assert record["metrics"] == uninterrupted["metrics"]
    assert record["status"] == "complete"
    samples = [json.loads(line) for line in open(resumed.stdout.strip().splitlines()[-1] + "/samples.jsonl")]
    assert len(samples) == 60 and len({s["id"] for s in samples}) == 60


def test_ctrl_c_writes_a_partial_record_of_finished_samples(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(make_plugin(tmp_path / "site"))}
    counter = tmp_path / "generated.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dare.harness.cli", "--no-progress", "--backend", "sudoku-solver", "--model", "solver",
         "--suite", "sudoku", "--limit", "40", "--out", str(tmp_path / "runs"), "--set", "batch_size=4",
         "--set", "engine.delay=0.4", "--set", f"engine.counter={counter}"],  # ~3 s left after the signal
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    deadline = time.monotonic() + 60
    while generated_count(counter) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err  # stopped at a safe point: the batch in flight finished and was cached
    assert "stopped by SIGINT" in err and "rerun the same command to resume" in err and "Traceback" not in err
    run_dir = err.strip().rsplit("partial results in ", 1)[1]
    record = json.loads(open(f"{run_dir}/run.json").read())
    assert record["status"] == "partial" and record["flags"][-2:] == ["stopped=SIGINT", "grace_s=20"]
    n = record["metrics"]["sudoku"]["accuracy"]["n"]
    # Everything generated is cached and scored: the batch in flight finished before the stop.
    assert n == generated_count(counter) < 40 and record["counts"]["sudoku"]["missing"] == 40 - n


def test_a_changed_verifier_rescores_cached_generations_without_regenerating(tmp_path):
    env = {"PYTHONPATH": str(make_plugin(tmp_path / "site"))}
    args = ["--backend", "sudoku-solver", "--model", "solver", "--suite", "sudoku", "--limit", "10",
            "--out", str(tmp_path / "runs")]
    _, first = run_record(dare_eval(*args, env=env))
    assert first["counts"]["sudoku"]["generated"] == 10
    # Another verifier configuration is another verifier identity: new verdicts, same generations.
    _, second = run_record(dare_eval(*args, "--set", "verifier.accept_alternative_solutions=false", env=env))
    assert second["counts"]["sudoku"]["generated"] == 0 and second["counts"]["sudoku"]["cached"] == 10
    assert len(list((tmp_path / "runs" / ".cache" / "verdicts").glob("*.jsonl"))) == 2
    # the solver's grids are valid but not always the reference one: the strict reading scores them 0
    assert second["benchmarks"]["sudoku"]["verifier_options"] == {"accept_alternative_solutions": False}
    assert second["metrics"]["sudoku"]["accuracy"]["value"] < first["metrics"]["sudoku"]["accuracy"]["value"]
