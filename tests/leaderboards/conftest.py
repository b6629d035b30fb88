"""Shared fixtures: the standard 14-run fixture (plus 5 broken records) built once per session."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dare.leaderboards.build import BuildReport, build_site

from .leaderboard_fixtures import build_standard_fixture, read_data
from .pair_reference import reference_pairs


class BuiltSite:
    def __init__(self, root: Path, report: BuildReport, warnings: list[str]):
        self.root = root
        self.site = report.out
        self.report = report
        self.warnings = warnings
        self.index = read_data(self.site / "data" / "index.js")

    def suite(self, name: str) -> dict:
        return next(s for s in self.index["suites"] if s["name"] == name)

    def rows(self, suite: str, model: str) -> list[dict]:
        return [r for r in self.suite(suite)["rows"] if r["model"] == model]

    def reference_pairs(self, suite: str, baseline: str, n_boot: int = 1000) -> dict:
        """statistics.py's all-pairs tables (the spec) against ``baseline``, from the run records."""
        return reference_pairs(self.root / "runs", suite, baseline, "llada-8b-instruct", n_boot)


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> BuiltSite:
    root = tmp_path_factory.mktemp("leaderboard")
    build_standard_fixture(root)
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                records.append(record.getMessage())

    handler = Collect()
    logging.getLogger("dare.leaderboards").addHandler(handler)
    try:
        report = build_site([root / "runs"], root / "site", baseline="llada-8b-instruct",
                            title="DARE leaderboard (synthetic fixture)")
    finally:
        logging.getLogger("dare.leaderboards").removeHandler(handler)
    return BuiltSite(root, report, records)
