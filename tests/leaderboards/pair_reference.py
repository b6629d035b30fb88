"""The spec for pairs computed from the build's per-column data: statistics.py's all-pairs tables."""

from __future__ import annotations

import tempfile
from pathlib import Path

from dare.leaderboards.build import _collect_samples, _pair_columns
from dare.leaderboards.loading import load_runs
from dare.leaderboards.statistics import paired_tables, pairs_for_baseline
from dare.leaderboards.table import build_tables


def reference_pairs(runs: Path, suite: str, baseline: str, build_baseline: str | None = None,
                    n_boot: int = 1000) -> dict:
    """``pairs_for_baseline(*paired_tables(...))`` for one suite of the records under ``runs``."""
    tables = [t for t in build_tables(load_runs([runs]).runs, build_baseline) if t.name == suite]
    with tempfile.TemporaryDirectory() as shards:
        columns = _pair_columns(tables[0], _collect_samples(tables, Path(shards)))
    rows, stats = paired_tables(columns, n_boot)
    return pairs_for_baseline(rows, stats, baseline)


def assert_pairs_match(got: dict, want: dict) -> int:
    """Same rows, columns and n; delta, lo, hi within 1e-6 and p within 1e-5 relative; returns the
    number of (row, column) entries compared.

    Why a tolerance: the spec resamples in float32 (statistics.py), the page and pairdata.py in
    float64, and intervals of 0/1 verdicts are ratios that often sit exactly on a rounding boundary of
    the sixth decimal (e.g. 0.0646875), so the shown value can differ by one unit there. McNemar's p
    sums the same terms, rounded to 6 significant digits.
    """
    assert sorted(got) == sorted(want)
    compared = 0
    for row, stats in want.items():
        assert sorted(got[row]) == sorted(stats), row
        for column, expected in stats.items():
            actual = got[row][column]
            assert actual[4] == expected[4], (row, column, actual, expected)
            for i, (x, y) in enumerate(zip(actual[:4], expected[:4])):
                assert (x is None) == (y is None), (row, column, actual, expected)
                if x is not None:
                    assert abs(x - y) <= (1e-5 * abs(y) if i == 3 else 1e-6) + 1e-12, (row, column, actual, expected)
            compared += 1
    return compared
