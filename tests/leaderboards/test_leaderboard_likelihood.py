"""A likelihood-scored benchmark's column holds its estimator: runs with mc_num 1 and 4, or CFG 0 and 0.5, never
share a column, a reference or a mean; runs with the same estimator do. Real runs (tests/harness/char_lm.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import dare
from dare.harness.registry import engines, likelihoods
from dare.leaderboards.build import build_site

from .leaderboard_fixtures import read_data

sys.path.insert(0, str(Path(__file__).parents[1] / "harness"))
import char_lm  # noqa: E402


@pytest.fixture
def char_engine():
    saved = engines.snapshot(), likelihoods.snapshot()
    char_lm.register()
    yield
    engines.restore(saved[0])
    likelihoods.restore(saved[1])


def test_estimator_options_split_columns(tmp_path, char_engine):
    for model, sets in (("a", ["likelihood.mc_num=1"]), ("b", ["likelihood.mc_num=4"]),
                        ("c", ["likelihood.mc_num=1", "gen_length=64", "steps=64"]), ("d", ["likelihood.cfg=0.5"])):
        dare.evaluate(dare.plan(model=model, suite="sudoku_choice", engine="char-lm", limit=8, out=tmp_path / "runs",
                                overrides=["likelihood.estimator=noisy", *sets]))
    report = build_site([tmp_path / "runs"], tmp_path / "site", n_boot=50)
    suite = next(s for s in read_data(report.out / "data" / "index.js")["suites"] if s["name"] == "sudoku_choice")
    columns = {c["id"]: c for c in suite["columns"]}
    version = "yjyddq/DARE sudoku_1, choices by generator seed 20261206"
    mc1 = f"sudoku_choice@{version}#noisy v1 cfg=0.0 fail_after=None mc_num=1"
    mc4 = f"sudoku_choice@{version}#noisy v1 cfg=0.0 fail_after=None mc_num=4"
    cfg = f"sudoku_choice@{version}#noisy v1 cfg=0.5 fail_after=None mc_num=1"
    assert set(columns) == {mc1, mc4, cfg}
    assert columns[mc4]["label"].endswith("· noisy v1 cfg=0.0 fail_after=None mc_num=4")
    cells = {row["model"]: set(row["cells"]) for row in suite["rows"]}
    assert cells == {"a": {mc1}, "b": {mc4}, "c": {mc1}, "d": {cfg}}
    # one estimator, two models: the same column, nothing flagged but the subset (c's other decoding is not read)
    assert {f["kind"] for row in suite["rows"] for c in row["cells"].values() for f in c["flags"]} == {"subset"}
