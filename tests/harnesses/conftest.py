"""The native run the harness adapters are compared with: dare-eval's Sudoku on tiny-sdar, first 16 puzzles."""

from __future__ import annotations

import json

import pytest

import dare
from dare.harness.records import RunRecord

LIMIT = 16
# steps=16 over blocks of 4 commits two tokens a step: tiny-sdar then solves 12 of the first 16 puzzles (75%, not
# 100%), so a prompt, seed or setting that differs from dare-eval's shows in the score and the texts
SETTINGS = {"steps": 16}


def read_run(run_dir):
    record = RunRecord.model_validate_json((run_dir / "run.json").read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    return record, rows


@pytest.fixture(scope="session")
def native_sudoku(tmp_path_factory):
    """(record, rows) of ``dare-eval --model tiny-sdar --suite sudoku --limit 16 --set steps=16``."""
    plan = dare.plan(model="tiny-sdar", suite="sudoku", limit=LIMIT,
                     overrides=[f"{k}={v}" for k, v in SETTINGS.items()], out=tmp_path_factory.mktemp("native"))
    dare.evaluate(plan)
    return read_run(plan.run_dir)
