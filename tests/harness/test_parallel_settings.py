"""--worker-restarts (dare-eval --workers N): validated in one line, execution only, recorded under run.json's
``execution`` only for runs spread over workers (the restarts themselves: tests/distributed/test_worker_restarts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dare
from dare.harness import cli
from dare.harness.errors import InputError
from dare.harness.parallel import DEFAULT_WORKER_RESTARTS, check_worker_restarts
from dare.harness.records import Execution, RunRecord

RELEASE_RUN = Path(__file__).parent / "fixtures" / "records_3e1baa9" / "replay_humaneval" / "run.json"


@pytest.mark.parametrize("bad", ["-1", "x", "2.5"])
def test_a_bad_worker_restart_budget_is_one_line_exit_2(bad, capfd):
    try:  # argparse refuses a non-number (SystemExit), the plan a negative one
        code = cli.main(["--model", "tiny-llada", "--suite", "sudoku", "--worker-restarts", bad, "--dry-run"])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--worker-restarts" in err[0] and "Traceback" not in err[0], err


@pytest.mark.parametrize("bad", [-1, True, "3", 1.0])
def test_the_library_refuses_what_the_flag_would(bad):
    with pytest.raises(InputError, match="--worker-restarts must be a whole number"):
        check_worker_restarts(bad)


def test_the_restart_budget_changes_no_hash_or_cache_key(tmp_path):
    plans = [dare.plan(model="tiny-llada", suite="sudoku", out=tmp_path, worker_restarts=n) for n in (0, 7)]
    assert plans[0].worker_restarts == 0 and plans[1].worker_restarts == 7
    assert plans[0].decoding.config_hash() == plans[1].decoding.config_hash()
    assert plans[0].generation_key() == plans[1].generation_key()
    assert dare.plan(model="tiny-llada", suite="sudoku", out=tmp_path).worker_restarts == DEFAULT_WORKER_RESTARTS


def test_execution_is_written_when_recorded_and_absent_otherwise():
    data = json.loads(RELEASE_RUN.read_text())
    assert "execution" not in RunRecord.model_validate(data).to_json()  # a run in one process, or an older record
    facts = {"workers": 2, "worker_restart_budget": 3, "worker_restarts": 1}
    record = RunRecord.model_validate({**data, "execution": facts})
    assert record.execution == Execution(**facts) and record.to_json()["execution"] == facts
