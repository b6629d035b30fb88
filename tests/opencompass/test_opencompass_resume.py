"""``dare-eval --backend opencompass`` runs through DARE's runner: a run killed with SIGKILL resumes from the
generation cache, and a second process on the same ``--out`` is refused (exit 2), as for the native engines
(tests/harness/test_resume_and_plugins.py, tests/harness/test_rundir_lock.py)."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("opencompass")

from ..harness.helpers import (  # noqa: E402
    assert_resumed,
    dare_eval,
    kill_9_mid_run,
    refused_while_held,
    run_record,
    write_completions,
)
from ..harness.plugin_fixture import make_plugin  # noqa: E402

OPENCOMPASS = ["--backend", "opencompass", "--set", "engine.via=sudoku-solver", "--model", "solver",
               "--suite", "sudoku"]


def test_kill_9_then_rerun_regenerates_nothing_finished_through_opencompass(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(make_plugin(tmp_path / "site"))}
    counter = tmp_path / "generated.txt"
    out = tmp_path / "runs"
    args = [*OPENCOMPASS, "--limit", "60", "--out", str(out), "--set", "batch_size=4",
            "--set", f"engine.counter={counter}"]
    before_kill = kill_9_mid_run(args, env, counter, out, deadline_s=120)

    resumed = dare_eval(*args, env={"PYTHONPATH": env["PYTHONPATH"]})
    run_dir, record = run_record(resumed)
    assert_resumed(record, counter, before_kill)
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
    refused_while_held(out, *args)
    _, record = run_record(dare_eval(*args))  # the lock died with its holder
    assert record["backend"]["name"] == "opencompass"
