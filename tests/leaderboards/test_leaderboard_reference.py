"""A column's comparability reference (the baseline, else a stated rule; never a vote), the suite mean's
interval inside the metric's range, and the y-axis of a flat training curve."""

from __future__ import annotations

import csv
import json

from dare.harness.records import DecodingConfig
from dare.leaderboards.build import build_site
from dare.leaderboards.comparability import REFERENCE_RULE
from dare.leaderboards.curves import curve_chart, y_bounds

from .leaderboard_fixtures import PLANNING, RunSpec, read_data, write_run

DECODING_X = DecodingConfig(gen_length=128, steps=128, block_length=32)
DECODING_Y = DecodingConfig(gen_length=128, steps=64, block_length=32)


def tie_runs(root, first: DecodingConfig, second: DecodingConfig):
    """Two models on ``first`` (a base and its identical twin), two on ``second``: a 2-2 tie in every column.
    The ``second`` pair holds the oldest runs."""
    specs = [RunSpec("t1-base", "planning", "base-model", PLANNING, 0.5, first, created_at="2026-11-20T10:00:00Z"),
             RunSpec("t2-twin", "planning", "twin-model", PLANNING, 0.5, first, created_at="2026-11-20T10:00:00Z"),
             RunSpec("t3-other", "planning", "other-model", PLANNING, 0.5, second, created_at="2026-11-10T10:00:00Z"),
             RunSpec("t4-other2", "planning", "other-model-2", PLANNING, 0.5, second,
                     created_at="2026-11-10T10:00:00Z")]
    for spec in specs:
        write_run(root, spec)


def hatched(site) -> dict[str, bool]:
    """model -> whether its cells carry a major (non-comparable) flag."""
    [suite] = read_data(site / "data" / "index.js")["suites"]
    return {r["model"]: any(f["severity"] == "major" for c in r["cells"].values() for f in c["flags"])
            for r in suite["rows"]}


def test_on_a_two_two_tie_the_baseline_is_the_reference(tmp_path):
    # The base model's decoding is the one a vote would lose on a tie (its hash sorts last), so a majority
    # rule with any order-based tie-break hatches the base and its twin; the baseline rule must not.
    first, second = sorted([DECODING_X, DECODING_Y], key=lambda d: d.config_hash(), reverse=True)
    tie_runs(tmp_path / "runs", first, second)
    report = build_site([tmp_path / "runs"], tmp_path / "site", baseline="base-model")
    assert hatched(report.out) == {"base-model": False, "twin-model": False, "other-model": True, "other-model-2": True}
    [suite] = read_data(report.out / "data" / "index.js")["suites"]
    other = next(r for r in suite["rows"] if r["model"] == "other-model")
    [text] = [f["text"] for f in other["cells"]["countdown"]["flags"] if f["kind"] == "decoding"]
    assert text.startswith("decoding differs from the baseline's config") and "steps" in text
    assert suite["reference"] == next(r["id"] for r in suite["rows"] if r["model"] == "base-model")


def test_without_a_baseline_the_oldest_untrained_complete_run_is_the_reference(tmp_path):
    first, second = sorted([DECODING_X, DECODING_Y], key=lambda d: d.config_hash())
    tie_runs(tmp_path / "runs", first, second)  # the "second" pair is older: it is the reference
    report = build_site([tmp_path / "runs"], tmp_path / "site")
    assert hatched(report.out) == {"base-model": True, "twin-model": True, "other-model": False, "other-model-2": False}
    [suite] = read_data(report.out / "data" / "index.js")["suites"]
    assert suite["reference"] == REFERENCE_RULE
    # A trained run, even the oldest, is never the reference; nor is a partial one.
    write_run(tmp_path / "runs", RunSpec("t0-trained", "planning", "trained-model", PLANNING, 0.5, DECODING_X,
                                         training={"run": "train-x", "algorithm": "d1", "base_model": "base-model"},
                                         created_at="2026-10-01T10:00:00Z"))
    write_run(tmp_path / "runs", RunSpec("t0-partial", "planning", "partial-model", PLANNING, 0.5, DECODING_X,
                                         status="partial", used_fraction=0.5, created_at="2026-10-01T10:00:00Z"))
    report = build_site([tmp_path / "runs"], tmp_path / "site2")
    flags = hatched(report.out)
    assert flags["other-model"] is False and flags["base-model"] is True


def clip_run(root, name: str, value: float, ci: tuple[float, float]) -> None:
    """A planning run whose two cells read ``value`` with interval ``ci`` (run.json edited after writing)."""
    run_dir = write_run(root, RunSpec(name, "planning", name, PLANNING, 0.5))
    record = json.loads((run_dir / "run.json").read_text())
    for bench in PLANNING:
        record["metrics"][bench]["accuracy"].update(value=value, ci=list(ci))
    (run_dir / "run.json").write_text(json.dumps(record))


def test_the_suite_mean_interval_stays_inside_the_metric_range(tmp_path):
    # Two cells at 99% with [97%, 100%]: se = sqrt(2 (0.03 / 3.92)^2) / 2 = 0.00541, so the normal interval
    # is 0.99 +- 0.0106 = [0.9794, 1.0006]; clipped, it ends at 1. At the bottom likewise.
    clip_run(tmp_path / "runs", "high", 0.99, (0.97, 1.0))
    clip_run(tmp_path / "runs", "low", 0.01, (0.0, 0.03))
    report = build_site([tmp_path / "runs"], tmp_path / "site")
    [suite] = read_data(report.out / "data" / "index.js")["suites"]
    means = {r["model"]: r["mean"] for r in suite["rows"]}
    assert abs(means["high"]["ci"][0] - 0.97939) < 1e-4 and means["high"]["ci"][1] == 1.0
    assert means["low"]["ci"][0] == 0.0 and abs(means["low"]["ci"][1] - 0.02061) < 1e-4
    with (report.out / "leaderboard.csv").open() as handle:
        rows = [line for line in csv.DictReader(handle) if line["benchmark"] == "mean"]
    assert all(0.0 <= float(line["ci_low"]) <= float(line["ci_high"]) <= 1.0 for line in rows)


def test_a_flat_curve_gets_an_axis_around_its_value():
    assert y_bounds([0.0, 0.0]) == (0.0, 1.0)  # a reward that never moves from 0 reads 0 on a 0..1 axis
    assert y_bounds([0.5, 0.5]) == (0.0, 1.0)
    assert y_bounds([3.0, 3.0]) == (0.0, 3.0) and y_bounds([-1.0, -1.0]) == (-1.0, 1.0)
    assert y_bounds([0.2, 0.6]) == (0.2, 0.6)
    chart = curve_chart([{"step": s, "reward": 0.0} for s in range(5)], "m")
    assert '>0</text>' in chart and '>1</text>' in chart and '>2</text>' not in chart
