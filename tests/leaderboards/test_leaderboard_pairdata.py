"""One baseline's pairs from the per-column data (what the page computes) equal the all-pairs spec."""

from __future__ import annotations

import numpy as np
import pytest

from dare.leaderboards.pairdata import baseline_pairs, column_data
from dare.leaderboards.statistics import MEAN_KEY, paired_tables, pairs_for_baseline, union_arrays

from .pair_reference import assert_pairs_match


def random_rows(rng, binary: bool, missing: float, n_rows: int = 7, n_items: int = 60) -> dict:
    rows = {}
    for r in range(n_rows):
        ids = [f"s{i:03d}" for i in range(n_items) if rng.random() > missing]
        rows[f"row{r}"] = ({i: float(rng.random() < 0.5) if binary else float(rng.random()) for i in ids}, binary)
    return rows


@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_every_baseline_matches_paired_tables_with_verdicts_scores_and_missing_items(missing):
    rng = np.random.default_rng(11)
    columns = {"verdicts": random_rows(rng, True, missing), "scores": random_rows(rng, False, missing / 2),
               "full": random_rows(rng, True, 0.0)}
    columns["verdicts"]["row7"] = ({"s000": 1.0, "s001": 0.0}, True)  # shares items with few resamples
    rows, tables = paired_tables(columns, 300)
    data = {column: column_data(per_row, 300, column) for column, per_row in columns.items()}
    for baseline in rows:
        got = baseline_pairs(data, baseline)
        assert assert_pairs_match(got, pairs_for_baseline(rows, tables, baseline)) >= 6
        assert all(stats[3] is None for stats in (p.get("scores") for p in got.values()) if stats)


def test_the_data_is_linear_in_the_rows_and_names_only_ids_some_row_misses():
    rng = np.random.default_rng(12)
    per_row = random_rows(rng, True, 0.0, n_rows=5, n_items=40)
    per_row["row1"][0].pop("s007")
    data = column_data(per_row, 100, "bench")
    assert data["n"] == 40 and data["rows"] == sorted(per_row)
    assert np.shape(data["totals"]) == (5, 100) and np.shape(data["values"]) == (5, 40)
    assert data["missing"] == [7] and np.shape(data["weights"]) == (1, 100)
    assert data["values"][1][7] is None and all(isinstance(v, int) for v in data["values"][0])
    weights = union_arrays(per_row, 100, "bench")[4]  # the seeded resampling counts W[B, N]
    np.testing.assert_array_equal(data["weights"], weights[:, [7]].T)
    values = np.array([[v or 0 for v in row] for row in data["values"]])
    np.testing.assert_array_equal(data["totals"], values @ weights.T)


def test_the_suite_mean_needs_the_pair_in_every_column():
    rng = np.random.default_rng(13)
    full = {f"s{i}": float(rng.random() < 0.5) for i in range(40)}
    columns = {"one": {"a": (full, True), "b": (dict(full), True), "c": (dict(full), True)},
               "two": {"a": (full, True), "b": (dict(full), True)}}
    pairs = baseline_pairs({c: column_data(v, 100, c) for c, v in columns.items()}, "a")
    assert MEAN_KEY in pairs["b"] and MEAN_KEY not in pairs["c"]
    assert pairs["b"][MEAN_KEY] == [0.0, 0.0, 0.0, None, 80]
