"""Building the site from the standard fixture: table, flags, paired statistics, exports, skipping."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

from dare.harness.records import RunRecord

from .leaderboard_fixtures import DECODING_A, DECODING_B, read_data


def run_record(built, run_key: str) -> RunRecord:
    return RunRecord.model_validate(read_data(built.site / "data" / "runs" / f"{run_key}.js")["record"])


def test_rows_are_model_decoding_training_and_columns_are_benchmarks(built):
    math_suite, planning = built.suite("math"), built.suite("planning")
    assert [c["id"] for c in math_suite["columns"]] == ["aime2024", "gsm8k", "math500"]
    assert [c["label"] for c in planning["columns"]] == ["countdown (version unknown)", "sudoku (version unknown)"]
    assert len(math_suite["rows"]) == 9 and len(planning["rows"]) == 4
    llada = built.rows("math", "llada-8b-instruct")
    assert sorted(r["decoding_hash"] for r in llada) == sorted([DECODING_A.config_hash(), DECODING_B.config_hash()])
    assert len({r["group"] for r in llada}) == 1, "two decodings of one model share a group"
    assert {r["algorithm"] for r in math_suite["rows"]} == {"base", "d1", "mdpo", "coupled_grpo", "spg"}
    assert {r["backend_name"] for r in math_suite["rows"]} == {"torch", "lmdeploy"}


def test_every_cell_shows_its_runs_metric_and_the_newest_complete_run_wins(built):
    for suite in built.index["suites"]:
        for row in suite["rows"]:
            for bench, cell in row["cells"].items():
                metric = run_record(built, cell["run"]).metrics[bench][suite["metrics"][bench]]
                assert (cell["v"], cell["lo"], cell["hi"], cell["n"]) == (metric.value, *metric.ci, metric.n)
    row_a = next(r for r in built.rows("math", "llada-8b-instruct") if r["decoding_hash"] == DECODING_A.config_hash())
    assert all(c["run"].startswith("r01-llada-a-") for c in row_a["cells"].values())
    assert all(c["others"] == 1 for c in row_a["cells"].values()), "the older rerun r10 is superseded"


def test_cells_that_differ_from_their_column_are_flagged_with_the_difference(built):
    by_model = {(r["model"], r["decoding_hash"]): r for r in built.suite("math")["rows"]}
    row_b = by_model[("llada-8b-instruct", DECODING_B.config_hash())]
    for cell in row_b["cells"].values():
        texts = [f["text"] for f in cell["flags"] if f["kind"] == "decoding"]
        assert texts and "steps 128 (column: 256)" in texts[0]
    small = next(r for r in built.suite("math")["rows"] if r["model"] == "sdar-1.7b-chat")
    assert [f["kind"] for f in small["cells"]["math500"]["flags"]] == ["data"]
    assert small["cells"]["gsm8k"]["flags"] == []
    row_a = by_model[("llada-8b-instruct", DECODING_A.config_hash())]
    assert all(c["flags"] == [] for c in row_a["cells"].values())
    tiny = built.rows("planning", "tiny-llada")[0]
    assert all([(f["kind"], f["severity"]) for f in c["flags"]] == [("batch", "minor")] for c in tiny["cells"].values())


def test_partial_run_is_marked_and_not_averaged(built):
    spg = built.rows("math", "llada-8b-spg")[0]
    assert set(spg["cells"]) == {"gsm8k", "math500"}
    assert all(any(f["kind"] == "partial" for f in c["flags"]) for c in spg["cells"].values())
    assert spg["mean"]["value"] is None and spg["mean"]["missing"] == ["aime2024"]
    dream = built.rows("math", "dream-7b-instruct")[0]
    expected = sum(c["v"] for c in dream["cells"].values()) / 3
    assert math.isclose(dream["mean"]["value"], expected)
    assert dream["mean"]["ci"][0] < expected < dream["mean"]["ci"][1]


def test_trained_rows_have_curves_and_link_to_their_base_row(built):
    base = next(r for r in built.rows("math", "llada-8b-instruct") if r["decoding_hash"] == DECODING_A.config_hash())
    for model in ("llada-8b-d1", "llada-8b-mdpo"):  # inline curve and metrics_path curve
        row = built.rows("math", model)[0]
        assert row["base_row"] == base["id"]
        assert row["spark"].startswith("<svg") and row["spark"].count("<polyline") == 2
        detail = read_data(built.site / "data" / "runs" / f"{row['cells']['gsm8k']['run']}.js")
        assert detail["curves"].count("<svg") == 2 and "reward" in detail["curves"]
    cgrpo = built.rows("math", "dream-7b-coupled-grpo")[0]
    assert cgrpo["base_row"] == built.rows("math", "dream-7b-instruct")[0]["id"]
    assert base["spark"] is None and base["base_row"] is None


def _verdicts(run_dir: Path, bench: str) -> dict[str, bool]:
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return {r["id"]: r["passed"] for r in rows if r["benchmark"] == bench and r["status"] == "scored"}


def test_paired_deltas_and_mcnemar_match_the_samples(built):
    base = next(r for r in built.rows("math", "llada-8b-instruct") if r["decoding_hash"] == DECODING_A.config_hash())
    assert built.index["baseline"]["math"] == base["id"]
    pairs = read_data(built.site / "data" / "pairs" / f"{base['id']}.js")
    runs = built.root / "runs"
    for model, run_id in (("llada-8b-d1", "r05-llada-d1"), ("llada-8b-spg", "r08-llada-spg-partial")):
        row = built.rows("math", model)[0]
        mine, theirs = _verdicts(runs / run_id, "gsm8k"), _verdicts(runs / "r01-llada-a", "gsm8k")
        shared = sorted(set(mine) & set(theirs))
        delta, lo, hi, p, n = pairs[row["id"]]["gsm8k"]
        assert n == len(shared)
        assert math.isclose(delta, sum(mine[s] - theirs[s] for s in shared) / n, abs_tol=1e-6)
        assert lo <= delta <= hi
        gained = sum(mine[s] and not theirs[s] for s in shared)
        lost = sum(theirs[s] and not mine[s] for s in shared)
        tail = sum(math.comb(gained + lost, k) for k in range(min(gained, lost) + 1)) / 2 ** (gained + lost)
        assert math.isclose(p, min(1.0, 2 * tail), rel_tol=1e-5)
    assert len(shared) < 60, "the partial run pairs on the shared half only"
    d1 = pairs[built.rows("math", "llada-8b-d1")[0]["id"]]
    assert d1["gsm8k"][1] > 0, "the d1 model (skill 0.70 vs 0.55) is significantly better on gsm8k"
    assert set(d1) == {"aime2024", "gsm8k", "math500", "_mean"}
    other_data = pairs[next(r for r in built.suite("math")["rows"] if r["model"] == "sdar-1.7b-chat")["id"]]
    assert "math500" not in other_data and "_mean" not in other_data, "no pairing across different data files"


def test_invalid_run_records_are_skipped_with_a_warning_naming_the_file(built):
    skipped = {Path(s.path).parent.name: s.reason for s in built.report.skipped}
    assert set(skipped) == {f"broken-{n}" for n in ("newer_schema", "unknown_field", "hash_mismatch", "missing_field",
                                                    "bad_json")}
    assert "newer than this dare" in skipped["broken-newer_schema"]
    assert "config_hash" in skipped["broken-hash_mismatch"]
    for name in skipped:
        assert any(f"{name}/run.json" in w for w in built.warnings), name
    assert len(built.index["skipped"]) == 5


def test_exports_hold_the_table(built):
    with (built.site / "leaderboard.csv").open() as handle:
        lines = list(csv.DictReader(handle))
    document = json.loads((built.site / "leaderboard.json").read_text())
    cells = sum(len(r["cells"]) + 1 for s in built.index["suites"] for r in s["rows"])
    assert len(lines) == len(document["rows"]) == cells
    d1 = next(line for line in lines if line["model"] == "llada-8b-d1" and line["suite"] == "math"
              and line["benchmark"] == "gsm8k")
    assert float(d1["value"]) == built.rows("math", "llada-8b-d1")[0]["cells"]["gsm8k"]["v"]
    assert d1["comparable"] == "True"
    # Every trained row names its training run (the key dare-train writes), every base row leaves it empty.
    assert {line["training_run"] for line in lines if line["algorithm"] == "d1"} == {"train-d1-llada-8b-instruct"}
    assert all(bool(line["training_run"]) == (line["algorithm"] != "base") for line in lines)
    small = next(line for line in lines if line["model"] == "sdar-1.7b-chat" and line["benchmark"] == "math500")
    assert small["comparable"] == "False" and "data sha256" in small["flags"]


def test_site_is_self_contained_and_loads_nothing_remote(built):
    page = (built.site / "index.html").read_text()
    for src in re.findall(r'(?:src|href)="([^"]+)"', page):
        assert src == "data:," or (built.site / src).is_file(), src
    for path in [built.site / "index.html", *(built.site / "assets").iterdir()]:
        text = path.read_text()
        assert not re.search(r"https?://", text), path
        assert "fetch(" not in text and "XMLHttpRequest" not in text and "import(" not in text, path
    assert "connect-src 'none'" in page


def test_each_cell_has_a_complete_sample_shard(built):
    row = built.rows("math", "llada-8b-d1")[0]
    detail = read_data(built.site / "data" / "runs" / f"{row['cells']['gsm8k']['run']}.js")
    shard = read_data(built.site / detail["cells"]["gsm8k"]["shard"])
    source = [json.loads(line)
              for line in (built.root / "runs" / "r05-llada-d1" / "samples.jsonl").read_text().splitlines()]
    assert shard == [s for s in source if s["benchmark"] == "gsm8k"]
    assert detail["cells"]["gsm8k"]["verdicts"]["pass"] == sum(s["passed"] for s in shard)
