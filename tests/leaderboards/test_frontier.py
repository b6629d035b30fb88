"""Frontier grouping, figures and Pareto fronts on hand-made records (numbers in frontier_fixtures.py),
and the shipped frontier records of docs/figures/frontier against the JSON decode_frontier.py wrote."""

from __future__ import annotations

import json
import re
import runpy
from html import unescape
from pathlib import Path

import pytest

from dare.harness.records import RunRecord
from dare.leaderboards.build import build_site
from dare.leaderboards.frontier import build_frontiers, group_key, page_name, pareto
from dare.leaderboards.loading import load_runs

from .frontier_fixtures import EXPECTED, GROUP, write_frontier_runs

REPO = Path(__file__).resolve().parents[2]
FIGURES = REPO / "docs" / "figures" / "frontier"


@pytest.fixture(scope="module")
def frontiers(tmp_path_factory):
    root = write_frontier_runs(tmp_path_factory.mktemp("frontier-runs"))
    return build_frontiers(load_runs([root]).runs)


def test_pareto_keeps_ties_and_drops_the_dominated():
    # (0.5, 10) is dominated by (0.6, 10): equal speed, better accuracy. The two (0.6, 10) tie: both stay.
    assert pareto([(0.6, 10.0), (0.5, 10.0), (0.6, 10.0), (0.9, 1.0), (0.2, 30.0), (0.1, 30.0)]) == \
        [True, False, True, True, True, False]


def test_one_frontier_per_group_with_two_or_more_strategies(frontiers):
    # The 128-token canvas, the batch-4 run and the partial run stay out; the other model has its own.
    assert sorted((f.shared["model"], len(f.points)) for f in frontiers) == [("tiny-llada", 6), ("tiny-other", 2)]
    llada = next(f for f in frontiers if f.shared["model"] == "tiny-llada")
    assert {p.run.record.run_id for p in llada.points} == {s.run_id for s in GROUP} - {"f04-random-old"}
    assert llada.reference.label == "low_confidence"
    assert llada.shared["machine"] == "Test CPU 9000, 2 cores, 1 torch thread(s), AVX2"


def test_figures_and_fronts_match_the_hand_computed_table(frontiers):
    llada = next(f for f in frontiers if f.shared["model"] == "tiny-llada")
    got = {p.label: (p.accuracy, p.tokens_per_s, p.nfe_per_token, p.front_speed, p.front_nfe) for p in llada.points}
    assert got.keys() == EXPECTED.keys()
    for label, expected in EXPECTED.items():
        assert got[label][:3] == pytest.approx(expected[:3]), label
        assert got[label][3:] == expected[3:], label


def test_group_key_splits_on_data_machine_and_batch_but_not_on_the_strategy(tmp_path):
    record = RunRecord.model_validate_json(
        (write_frontier_runs(tmp_path) / "f01-low-confidence" / "run.json").read_text())
    key = group_key(record)
    strategy = record.model_copy(update={"decoding": record.decoding.model_copy(
        update={"remasking": "klass", "threshold": 0.9, "steps": 32, "cache": "dual"})})
    assert group_key(strategy) == key
    data = record.model_copy(update={"benchmarks": {
        "sudoku": record.benchmarks["sudoku"].model_copy(update={"data_sha256": "e" * 64})}})
    machine = record.model_copy(update={"environment": record.environment.model_copy(update={"cpu": "Other CPU"})})
    batch = record.model_copy(update={"decoding": record.decoding.model_copy(update={"batch_size": 1})})
    canvas = record.model_copy(update={"decoding": record.decoding.model_copy(update={"gen_length": 128})})
    assert len({key, group_key(data), group_key(machine), group_key(batch), group_key(canvas)}) == 5


def _page_rows(html: str) -> dict[str, dict[str, str]]:
    """run id -> the numbers of its row in a frontier page's table."""
    rows = {}
    for row in re.findall(r"<tr data-run=.*?</tr>", html):
        cells = [unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        rows[cells[-1]] = {"accuracy": cells[2], "tokens_per_s": cells[5], "ratio": cells[6], "nfe_per_token": cells[7],
                           "label": " ".join(cells[:2])}
    return rows


@pytest.mark.parametrize("model", ["tiny-llada", "tiny-sdar", "tiny-llada-long", "tiny-dream-sudoku"])
def test_shipped_frontier_records_rebuild_the_figures_of_their_json(model, tmp_path):
    """The page reads tokens/s and NFE from run records; decode_frontier.py computed them from the same
    runs its own way. Both must agree for every strategy, and every strategy must score above 0."""
    report = json.loads((FIGURES / model / "frontier.json").read_text())
    site = build_site([FIGURES / model], tmp_path / "site").out
    by_run = _page_rows((site / page_name(model, report["suite"])).read_text())
    assert len(by_run) == len(report["strategies"])
    for label, strategy in report["strategies"].items():
        row = by_run[Path(strategy["run_dir"]).name]
        assert strategy["accuracy"] > 0, label
        assert row["accuracy"] == f"{100 * strategy['accuracy']:.1f}%", label
        assert float(row["tokens_per_s"]) == pytest.approx(strategy["tokens_per_s"], abs=0.06), label
        assert float(row["nfe_per_token"]) == pytest.approx(strategy["nfe_per_token"], abs=6e-4), label
        # the page's reference (the default strategy) is the script's <family>:low_confidence; the page divides
        # tokens/s as the records round them (0.1), so a 26x ratio over a 70 tokens/s reference moves by ~0.02
        assert float(row["ratio"]) == pytest.approx(strategy["speedup"], rel=1e-3, abs=0.011), label
        if "steps" not in (json.loads((Path(strategy["run_dir"]) / "run.json").read_text())["decoding_fields"]):
            assert "steps" not in row["label"], label  # a decoder that does not read steps is not labelled by it


def test_a_run_replayed_from_the_cache_has_no_speed_but_keeps_its_nfe_point(tmp_path):
    root = write_frontier_runs(tmp_path / "runs")
    path = root / "f02-klass" / "run.json"
    record = json.loads(path.read_text())
    record["counts"]["sudoku"].update(generated=0, cached=10)  # nothing generated: generate_s timed no work
    path.write_text(json.dumps(record))
    llada = next(f for f in build_frontiers(load_runs([root]).runs) if f.shared["model"] == "tiny-llada")
    klass = next(p for p in llada.points if p.label == "klass")
    assert klass.tokens_per_s is None and not klass.front_speed and klass.front_nfe
    site = build_site([root], tmp_path / "site").out
    html = (site / page_name("tiny-llada", "sudoku")).read_text()
    assert html.count('data-label="klass"') == 1  # on the NFE chart only


def test_axis_ticks_are_round_and_cover_the_range():
    from dare.leaderboards.frontier_page import nice_ticks
    assert nice_ticks(0.0, 1082.0) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(0.54, 1.02) == pytest.approx([0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert nice_ticks(0.0, 0.0) == [0.0]  # a constant axis still gets one tick


def test_the_picture_script_refuses_a_missing_records_folder_in_one_line(tmp_path, capsys):
    script = runpy.run_path(str(REPO / "benchmarks" / "frontier_picture.py"))
    assert script["main"](["--records", str(tmp_path / "nowhere"), "--out", str(tmp_path / "f.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--records" in err and "decode_frontier.py" in err
    assert not (tmp_path / "f.png").exists()
