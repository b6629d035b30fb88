"""The README's leaderboard picture and its choice table come from real kept records: docs/figures/leaderboard,
made by ``benchmarks/leaderboard_picture.py --run`` at a clean commit. Every record there was made by one of the
script's commands on a shipped tiny model (or a training run from one) at a commit with no local changes, the
README's numbers are those records' numbers, and no kept record folder under docs/figures holds a run cache."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from dare.harness import config
from dare.leaderboards.build import build_site
from dare.leaderboards.loading import load_runs

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "docs" / "figures" / "leaderboard"
sys.path.insert(0, str(REPO / "benchmarks"))
import leaderboard_picture  # noqa: E402


@pytest.fixture(scope="module")
def runs():
    loaded = load_runs([RECORDS])
    assert not loaded.skipped
    return loaded.runs


def test_every_record_was_made_by_the_script_at_a_clean_commit(runs):
    commands = {tuple(c[1:]) for _, c in leaderboard_picture.RUNS if c[0] == "dare-eval"}
    assert len(runs) == len(leaderboard_picture.RUNS)  # one per command; the training run's is its evaluation
    made = set()
    for run in runs:
        env = run.record.environment
        assert env.git_dirty is False and re.fullmatch(r"[0-9a-f]{40}", env.git_commit or "")
        shipped = run.record.model.name.split("-sft")[0].split("+")[0]
        assert config.model(shipped).name.startswith("tiny-")  # no real model name on a tiny model's row
        if "--out" in run.record.command and run.record.command[0].endswith("dare-eval"):
            args = run.record.command[1:run.record.command.index("--out")]
            made.add(tuple(args))
    assert made == commands


def test_the_picture_s_site_builds_with_its_baseline(runs, tmp_path):
    report = build_site([RECORDS], tmp_path / "site", baseline="tiny-llada", n_boot=50)
    assert report.suites["sudoku"] == 6 and not report.skipped


def test_the_readme_choice_table_holds_the_kept_records(runs):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for run in runs:
        [(bench, info)] = run.record.benchmarks.items()
        if info.estimator is None:
            continue
        chat = "chat template" if (info.fewshot or {}).get("chat_template") else "raw text"
        acc = run.record.metrics[bench]["acc"]
        cell = f"{100 * acc.value:.1f} [{100 * acc.ci[0]:.1f}, {100 * acc.ci[1]:.1f}]"
        row = f"| {run.record.model.name} | {bench} | {chat} |"
        assert any(line.startswith(row) and line.rstrip().endswith(f"| {acc.n} | {cell} |")
                   for line in readme.splitlines()), (row, cell)


def test_no_kept_record_folder_holds_a_run_cache():
    caches = [p for p in (REPO / "docs" / "figures").rglob("*") if p.name in (".cache", ".lock")]
    assert caches == []


def test_every_kept_record_names_a_clean_commit():
    """Every run.json under docs/figures (leaderboard, comparisons, frontier) was made at a commit with no local
    changes, so each number the README shows can be traced to the code that made it."""
    records = sorted((REPO / "docs" / "figures").rglob("run.json"))
    assert len(records) > 100
    dirty = [str(p.relative_to(REPO)) for p in records
             if not _clean(json.loads(p.read_text(encoding="utf-8")).get("environment", {}))]
    assert dirty == []


def _clean(environment: dict) -> bool:
    commit = environment.get("git_commit", "")
    return environment.get("git_dirty") is False and re.fullmatch(r"[0-9a-f]{40}", commit) is not None
