"""The across-seed summary of a comparison: each formula checked against values worked by hand."""

from __future__ import annotations

import math

import pytest

from dare.harness.metrics import bootstrap_ci
from dare.trainers.experiments.seeds import across_seeds, pooled_paired, t975


def test_across_seeds_is_a_student_t_interval_on_the_sample_standard_deviation():
    got = across_seeds([0.5, 0.6, 0.7])
    # sample sd 0.1 (population sd would be 0.0816), t(0.975, 2) = 4.303
    half = 4.303 * 0.1 / math.sqrt(3)
    assert got["value"] == pytest.approx(0.6)
    assert got["ci"] == pytest.approx([0.6 - half, 0.6 + half]) and half == pytest.approx(0.24843, abs=1e-5)
    assert got["n"] == 3 and got["values"] == [0.5, 0.6, 0.7]
    assert across_seeds([0.4])["ci"] is None  # one seed says nothing about the spread


def test_t_quantiles_from_the_table_and_beyond_it():
    assert [t975(df) for df in (1, 2, 4, 30)] == [12.706, 4.303, 2.776, 2.042]
    assert t975(40) == pytest.approx(2.021, abs=1e-3) and t975(120) == pytest.approx(1.980, abs=1e-3)


def test_the_paired_change_averages_each_sample_over_seeds_then_subtracts_the_start():
    base = {"a": {"accuracy": 0.0}, "b": {"accuracy": 1.0}, "c": {"accuracy": 0.0}}
    seeds = [{"a": {"accuracy": 1.0}, "b": {"accuracy": 0.0}, "c": {"accuracy": 1.0}},
             {"a": {"accuracy": 0.0}, "b": {"accuracy": 0.0}}]  # "c" unscored in this seed: left out
    got = pooled_paired(seeds, base, "accuracy")
    diffs = [0.5 - 0.0, 0.0 - 1.0]
    assert got["n"] == 2 and got["value"] == pytest.approx(-0.25)
    assert got["ci"] == list(bootstrap_ci(diffs))
