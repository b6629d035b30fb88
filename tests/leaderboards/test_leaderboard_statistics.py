"""Paired statistics: the fast all-pairs bootstrap equals the direct one, McNemar is exact, CIs behave."""

from __future__ import annotations

import math

import numpy as np

from dare.leaderboards.statistics import (
    MEAN_KEY,
    _column,
    bootstrap_deltas,
    mcnemar_exact,
    paired_tables,
    pairs_for_baseline,
    point_estimates,
)


def random_rows(rng, n_rows=6, n_items=50, missing=0.15, binary=True):
    rows = {}
    for r in range(n_rows):
        ids = [f"s{i}" for i in range(n_items) if rng.random() > missing]
        rows[r] = ({i: float(rng.random() < 0.5) if binary else float(rng.random()) for i in ids}, binary)
    return rows


def test_all_pairs_bootstrap_equals_the_direct_computation_with_missing_items():
    col = _column(random_rows(np.random.default_rng(1)), 300, "seed")
    seen = []
    for b, boot in bootstrap_deltas(col, block_floats=11000):  # blocks of 3 baselines
        seen.append(b)
        for j, a in enumerate(range(b + 1, len(col.rows))):
            shared = col.mask[a] & col.mask[b]
            direct = col.weights @ ((col.values[a] - col.values[b]) * shared) / (col.weights @ shared)
            np.testing.assert_allclose(boot[j], direct, rtol=1e-5)
    assert seen == list(range(len(col.rows) - 1))


def test_point_estimates_and_mcnemar_match_brute_force():
    col = _column(random_rows(np.random.default_rng(2)), 100, "seed")
    estimates = point_estimates(col)
    for a in range(len(col.rows)):
        for b in range(len(col.rows)):
            shared = col.mask[a] & col.mask[b]
            diff = (col.exact_values[a] - col.exact_values[b])[shared]
            assert estimates["n"][a, b] == shared.sum()
            if a == b:
                continue
            assert math.isclose(estimates["delta"][a, b], diff.mean(), abs_tol=1e-12)
            gained, lost = int((diff > 0).sum()), int((diff < 0).sum())
            tail = sum(math.comb(gained + lost, k) for k in range(min(gained, lost) + 1)) / 2 ** (gained + lost)
            assert math.isclose(estimates["p"][a, b], min(1.0, 2 * tail), rel_tol=1e-9)


def test_mcnemar_known_values():
    assert math.isclose(float(mcnemar_exact(np.array(10), np.array(2))), 0.03857421875, rel_tol=1e-9)
    assert float(mcnemar_exact(np.array(0), np.array(0))) == 1.0
    assert float(mcnemar_exact(np.array(5), np.array(5))) == 1.0
    assert float(mcnemar_exact(np.array(700), np.array(600))) < 0.01  # large n stays finite in log space


def test_identical_rows_have_zero_delta_and_no_significance():
    values = {f"s{i}": float(i % 3 == 0) for i in range(80)}
    rows, tables = paired_tables({"bench": {"a": (values, True), "b": (dict(values), True)}}, n_boot=200)
    delta, lo, hi, p, n = pairs_for_baseline(rows, tables, "a")["b"]["bench"]
    assert (delta, lo, hi, p, n) == (0.0, 0.0, 0.0, 1.0, 80)


def test_clear_improvement_is_significant_and_antisymmetric():
    rng = np.random.default_rng(3)
    base = {f"s{i}": float(rng.random() < 0.4) for i in range(300)}
    better = {k: 1.0 if rng.random() < 0.3 else v for k, v in base.items()}
    rows, tables = paired_tables({"bench": {"base": (base, True), "better": (better, True)}}, n_boot=500)
    up = pairs_for_baseline(rows, tables, "base")["better"]["bench"]
    down = pairs_for_baseline(rows, tables, "better")["base"]["bench"]
    assert up[1] > 0 and up[3] < 1e-6
    assert down[:3] == [-up[0], -up[2], -up[1]] and down[3:] == up[3:]


def test_scores_that_are_not_verdicts_get_a_bootstrap_interval_but_no_mcnemar():
    rng = np.random.default_rng(4)
    a = {f"s{i}": float(rng.random()) for i in range(100)}
    b = {k: min(1.0, v + 0.2) for k, v in a.items()}
    rows, tables = paired_tables({"credit": {"a": (a, False), "b": (b, False)}}, n_boot=300)
    delta, lo, hi, p, n = pairs_for_baseline(rows, tables, "a")["b"]["credit"]
    assert p is None and 0 < lo <= delta <= hi and n == 100


def test_interval_covers_zero_about_95_percent_of_the_time_under_no_effect():
    rng = np.random.default_rng(5)
    misses = 0
    for trial in range(60):
        a = {f"s{i}": float(rng.random() < 0.5) for i in range(150)}
        b = {f"s{i}": float(rng.random() < 0.5) for i in range(150)}
        rows, tables = paired_tables({f"t{trial}": {"a": (a, True), "b": (b, True)}}, n_boot=400)
        _, lo, hi, _, _ = pairs_for_baseline(rows, tables, "a")["b"][f"t{trial}"]
        misses += not (lo <= 0 <= hi)
    assert misses <= 10  # expected 3 of 60; a broken interval misses far more often


def test_suite_mean_pairs_need_every_benchmark():
    rng = np.random.default_rng(6)
    full = {f"s{i}": float(rng.random() < 0.5) for i in range(40)}
    columns = {"one": {"a": (full, True), "b": (dict(full), True), "c": (dict(full), True)},
               "two": {"a": (full, True), "b": (dict(full), True)}}
    rows, tables = paired_tables(columns, n_boot=100)
    pairs = pairs_for_baseline(rows, tables, "a")
    assert MEAN_KEY in pairs["b"] and MEAN_KEY not in pairs["c"]
    assert pairs["b"][MEAN_KEY][4] == 80
