"""TPF and AUP of frontier groups (frontier.py, frontier_aup.py) on hand-made records whose numbers are
worked out in frontier_fixtures.py, the per-benchmark mean on hand-built points, and both carried to the
frontier page, the leaderboard's index data and the exports."""

from __future__ import annotations

import csv
import json
import re
from html import unescape

import pytest

from dare.leaderboards.build import build_site
from dare.leaderboards.frontier import BenchmarkPoint, Point, build_frontiers, page_name
from dare.leaderboards.frontier_aup import score_group
from dare.leaderboards.loading import load_runs

from .frontier_fixtures import AUP_EXPECTED, AUP_GROUP, EXPECTED, write_aup_runs, write_frontier_runs


def _group(root, model: str):
    return next(f for f in build_frontiers(load_runs([root]).runs) if f.shared["model"] == model)


def test_tpf_is_canvas_tokens_over_nfe_and_far_falls_leave_the_aup_undefined(tmp_path):
    llada = _group(write_frontier_runs(tmp_path), "tiny-llada")
    tpf = {p.label: p.tpf for p in llada.points}
    assert tpf == pytest.approx({label: 1 / row[2] for label, row in EXPECTED.items()})  # 64 / nfe
    assert llada.y_max == {"sudoku": 80.0}
    reference = llada.reference
    assert reference.aup == 80.0 and reference.benchmarks["sudoku"].aup == 80.0  # 1 x 80, no W on one point
    for point in llada.points:
        if point is not reference:
            assert point.aup is None and "more than 5 points below" in point.aup_note, point.label
    random = next(p for p in llada.points if p.label == "random")  # tied at TPF 1: the anchor comes first
    assert random.aup_note.startswith("accuracy at the highest TPF (50.00%)")


def test_aup_curves_start_at_the_reference_and_pool_y_max_over_the_group(tmp_path):
    group = _group(write_aup_runs(tmp_path), "tiny-aup")
    assert group.reference.label == "low_confidence"
    assert group.y_max == {"sudoku": 82.0}  # pc_sampler's, above the reference's 80
    got = {p.label: (p.tpf, p.aup) for p in group.points}
    assert got.keys() == AUP_EXPECTED.keys()
    for label, (tpf, value) in AUP_EXPECTED.items():
        assert got[label][0] == pytest.approx(tpf), label
        assert got[label][1] == (None if value is None else pytest.approx(value, abs=1e-4)), label


def _point(**benchmarks: tuple[float, float | None]) -> Point:
    return Point(None, "p", 0.0, (0.0, 0.0), 1, None, None,
                 benchmarks={b: BenchmarkPoint(acc, tpf) for b, (acc, tpf) in benchmarks.items()})


def test_the_mean_is_over_the_group_s_benchmark_list_and_undefined_when_one_is():
    # Reference (1, 60%) on a and (1, 40%) on b; the strategy (3, 60%) and (2, 40%); y_max 60 and 40, so W = 1:
    # a: 60 + 0.5 x 2 x 120 = 180; b: 40 + 0.5 x 1 x 80 = 80; mean (180 + 80) / 2 = 130.
    reference = _point(a=(0.6, 1.0), b=(0.4, 1.0))
    strategy = _point(a=(0.6, 3.0), b=(0.4, 2.0))
    assert score_group([reference, strategy], reference) == pytest.approx({"a": 60.0, "b": 40.0})
    assert strategy.benchmarks["a"].aup == pytest.approx(180.0) and strategy.benchmarks["b"].aup == pytest.approx(80.0)
    assert strategy.aup == pytest.approx(130.0) and reference.aup == pytest.approx(50.0)  # (60 + 40) / 2
    fallen = _point(a=(0.6, 3.0), b=(0.3, 2.0))  # b falls 10 points
    unknown = _point(a=(0.6, 3.0), b=(0.4, None))  # b has a sample without NFE
    score_group([reference, fallen, unknown], reference)
    assert fallen.aup is None and fallen.aup_note.startswith("b: accuracy at the highest TPF (30.00%)")
    assert fallen.benchmarks["a"].aup == pytest.approx(180.0)  # the other benchmark keeps its AUP
    assert unknown.aup is None and unknown.aup_note == "b: no TPF: this run has a sample without NFE"


def test_the_page_shows_tpf_and_aup_and_why_an_aup_is_undefined(tmp_path):
    site = build_site([write_aup_runs(tmp_path / "runs")], tmp_path / "site").out
    html = (site / page_name("tiny-aup", "sudoku")).read_text()
    rows = {}
    for row in re.findall(r"<tr data-run=.*?</tr>", html):
        run = unescape(re.sub(r"<[^>]+>", "", re.findall(r'<td class="run">(.*?)</td>', row)[0]))
        aup = re.search(r'<td class="aup[^"]*"(?: title="([^"]*)")?>([^<]*)</td>', row)
        rows[run] = (re.search(r'<td class="tpf">([^<]*)</td>', row)[1], aup[2], unescape(aup[1] or ""))
    labels = {spec.run_id: spec.remasking for spec in AUP_GROUP}
    for run, (tpf, aup, _) in rows.items():
        want_tpf, want_aup = AUP_EXPECTED[labels[run]]
        assert tpf == f"{want_tpf:.2f}", run
        assert aup == ("undefined" if want_aup is None else f"{want_aup:.1f}"), run
    assert rows["a05-random"][2].startswith("accuracy at the highest TPF (70.00%) is more than 5 points below")
    assert "sudoku 82.0%" in html and "from the reference (low_confidence)" in html


def test_rows_of_a_frontier_group_carry_tpf_and_aup_into_the_index_and_the_exports(built):
    """The standard fixture's llada-8b-instruct math runs at 256 and 128 steps form a frontier group."""
    rows = {r["decoding"].split(" · ")[0]: r for r in built.suite("math")["rows"] if r["speed"]}
    assert set(rows) == {"steps 256", "steps 128"}
    assert not any(r["speed"] for r in built.suite("planning")["rows"])
    reference, fast = rows["steps 256"]["speed"], rows["steps 128"]["speed"]
    assert reference["reference"] and not fast["reference"] and reference["group"] == fast["group"]
    assert reference["page"].startswith("frontier/") and reference["page"].endswith(f"#g-{reference['group']}")
    # The reference's curve is its one point at TPF 1: its AUP is its accuracy in percent, per benchmark,
    # and the row's AUP the mean over the suite's three benchmarks.
    cells = rows["steps 256"]["cells"]
    assert reference["tpf"] == 1.0 and set(reference["benchmarks"]) == {"aime2024", "gsm8k", "math500"}
    for bench, figures in reference["benchmarks"].items():
        assert figures["aup"] == pytest.approx(100 * cells[bench]["v"]), bench
    assert reference["aup"] == pytest.approx(sum(100 * cells[b]["v"] for b in cells) / 3)
    # The 128-step run falls more than 5 points on two benchmarks: its mean is undefined, and says where.
    assert fast["aup"] is None and fast["note"].startswith("aime2024: accuracy at the highest TPF")
    assert "; gsm8k: " in fast["note"] and fast["benchmarks"]["math500"]["aup"] is not None
    with (built.site / "leaderboard.csv").open() as handle:
        lines = [line for line in csv.DictReader(handle) if line["frontier_group"]]
    assert len(lines) == 8  # two rows x (three benchmarks + the mean line)
    by = {(line["row"], line["benchmark"]): line for line in lines}
    mean = by[(rows["steps 256"]["id"], "mean")]
    assert float(mean["tpf"]) == 1.0 and float(mean["aup"]) == pytest.approx(reference["aup"])
    gsm8k = by[(rows["steps 128"]["id"], "gsm8k")]
    assert gsm8k["aup"] == "" and gsm8k["aup_undefined"].startswith("accuracy at the highest TPF")
    document = json.loads((built.site / "leaderboard.json").read_text())
    assert sum(1 for line in document["rows"] if line["frontier_group"]) == 8
