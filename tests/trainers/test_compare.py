"""dare-train --compare: every algorithm from one start with one budget, records side by side, resumable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dare.trainers.cli import main

TRAIN = {"suite": "sudoku", "steps": 1, "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 4,
         "eval_limit": 4, "lr": 1.0e-3, "decoding": {"gen_length": 8, "steps": 8, "block_length": 4},
         "rollout_decoding": {"temperature": 1.0}}


def write_config(tmp_path, **changes) -> str:
    data = {"kind": "comparison", "start": {"model": "tiny-sdar"}, "train": TRAIN,
            "runs": [{"algorithm": "dipo"}, {"algorithm": "dpo"}], **changes}
    path = tmp_path / "compare.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def records(root) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("run.json"))]


def test_comparison_trains_every_run_from_one_start_and_resumes(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["--compare", write_config(tmp_path), "--out", str(out)]) == 0
    summary = json.loads((out / "comparison.json").read_text())
    assert [r["name"] for r in summary["rows"]] == ["tiny-sdar", "dipo", "dpo"]
    start, *runs = summary["rows"]
    for row in runs:
        assert row["budget"] == {"steps": 1, "prompts_per_step": 2, "group_size": 2, "seed": 0}
        assert row["delta"]["accuracy"]["n"] == 4 and row["cpu_seconds"]["train"] > 0
        steps = [json.loads(line) for line in (out / "runs" / row["name"] / "metrics.jsonl").read_text().splitlines()]
        assert row["cpu_seconds"]["train"] == round(sum(r["cpu_s"] for r in steps), 1)
        lo, hi = row["delta"]["partial_credit"]["ci"]
        assert lo <= row["delta"]["partial_credit"]["value"] <= hi
    table = (out / "comparison.md").read_text()
    assert len(table.splitlines()) == 5 and "| dipo | dipo |" in table and "(start)" in table
    found = records(out)
    assert len(found) == 3 and len({json.dumps(r["decoding"], sort_keys=True) for r in found}) == 1
    trained = [r["model"]["training"] for r in found if r["model"].get("training")]
    assert sorted(t["algorithm"] for t in trained) == ["dipo", "dpo"]
    assert {t["base_model"] for t in trained} == {"tiny-sdar"}
    # a rerun finds everything done: no training step and no evaluation is repeated
    assert main(["--compare", write_config(tmp_path), "--out", str(out)]) == 0
    assert len(records(out)) == 3
    assert all(len((out / "runs" / n / "metrics.jsonl").read_text().splitlines()) == 1 for n in ("dipo", "dpo"))
    # and the records feed the leaderboard, the start as baseline
    from dare.leaderboards.build import build_site

    report = build_site([out], tmp_path / "site", baseline="tiny-sdar")
    assert report.runs == 3 and report.suites == {"sudoku": 3}


@pytest.mark.parametrize("changes, message", [
    ({"kind": "experiment"}, "needs 'kind: comparison'"),
    ({"start": {"model": "tiny-sdar", "recipe": "tiny_sdar_sudoku_sft"}}, "exactly one of 'model'"),
    ({"start": {"recipe": "tiny_sdar_sudoku_sft"}}, "needs 'init'"),
    ({"start": {"recipe": "tiny_sdar_sudoku_sft", "init": "tiny-gpt", "overrides": {"model": "tiny-sdar"}}},
     "start init 'tiny-gpt' is not a tiny model"),
    ({"runs": [{"algorithm": "dipo"}, {"algorithm": "dipo"}]}, "run names repeat"),
    ({"runs": [{"algorithm": "mdpo"}]}, "needs a bidirectional model and the start is block_causal"),
    ({"runs": [{"algorithm": "d2"}]}, "unknown algorithm 'd2'"),
    ({"train": {**TRAIN, "stepz": 3}}, "stepz"),
    ({"seeds": [0, 1], "train": {**TRAIN, "seed": 3}}, "not both"),
    ({"seeds": [1, 1]}, "seeds [1, 1] repeat"),
    ({"seeds": []}, "seeds"),
])
def test_bad_comparisons_are_one_line_errors_before_any_training(tmp_path, capsys, changes, message):
    out = tmp_path / "out"
    assert main(["--compare", write_config(tmp_path, **changes), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err
    assert not out.exists()


def test_only_names_known_runs(tmp_path, capsys):
    assert main(["--compare", write_config(tmp_path), "--out", str(tmp_path / "o"), "--only", "dipo,spg"]) == 2
    assert "--only ['spg']: no such run" in capsys.readouterr().err


def test_seeds_train_each_run_once_per_seed_and_summarise_across_them(tmp_path, capsys):
    from dare.trainers.experiments.seeds import t975
    from dare.trainers.experiments.tables import _per_sample

    out = tmp_path / "out"
    config = write_config(tmp_path, seeds=[0, 1], runs=[{"algorithm": "dipo"}])
    assert main(["--compare", config, "--out", str(out), "--only", "dipo-s1"]) == 0
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["dipo-s1"]
    assert main(["--compare", config, "--out", str(out), "--only", "dipo"]) == 0  # the name selects all its seeds
    summary = json.loads((out / "comparison.json").read_text())
    start, *runs = summary["rows"]
    assert [(r["name"], r["run"], r["seed"], r["budget"]["seed"]) for r in runs] == [
        ("dipo-s0", "dipo", 0, 0), ("dipo-s1", "dipo", 1, 1)]
    (across,) = summary["across_seeds"]
    assert across["seeds"] == [0, 1] and across["complete"]
    # the across-seed interval, by hand: mean +- t(0.975, 1) * sample sd / sqrt(2); sd = |a - b| / sqrt(2)
    a, b = (r["metrics"]["sudoku/partial_credit"]["value"] for r in runs)
    got = across["metrics"]["sudoku/partial_credit"]
    half = 12.706 * abs(a - b) / 2
    assert (got["value"] == pytest.approx((a + b) / 2)
            and got["ci"] == pytest.approx([(a + b) / 2 - half, (a + b) / 2 + half]))
    # the paired change averages each sample over the seeds before subtracting the start
    base = _per_sample(Path(start["eval_run"]))
    seeds = [_per_sample(Path(r["eval_run"])) for r in runs]
    diffs = [(seeds[0][k]["partial_credit"] + seeds[1][k]["partial_credit"]) / 2 - base[k]["partial_credit"]
             for k in base]
    assert across["delta"]["partial_credit"]["paired"]["value"] == pytest.approx(sum(diffs) / len(diffs))
    assert across["delta"]["partial_credit"]["across_seeds"]["values"] == [r["delta"]["partial_credit"]["value"]
                                                                           for r in runs]
    table = (out / "comparison.md").read_text()
    assert "| dipo | dipo | 0,1 |" in table and "| dipo-s1 | dipo |" in table and "Each seed:" in table
    assert t975(2) == 4.303 and t975(60) == pytest.approx(2.000, abs=1e-3)


@pytest.mark.slow
def test_sft_stage_start_and_parallel_runs(tmp_path):
    """The start trained here by the shipped recipe (2 steps), then two runs in two processes."""
    start = {"recipe": "tiny_sdar_sudoku_sft", "init": "tiny-sdar", "label": "sdar-sft2",
             "overrides": {"steps": 2, "model": "tiny-sdar", "save_every": 1}}
    out = tmp_path / "out"
    config = write_config(tmp_path, start=start, runs=[{"algorithm": "dipo"}, {"algorithm": "d1", "name": "d1x"}])
    assert main(["--compare", config, "--out", str(out), "--jobs", "2"]) == 0
    names = {r["model"]["name"] for r in records(out)}
    assert names == {"tiny-sdar-init+sft-step2", "sdar-sft2+dipo-step1", "sdar-sft2+d1-step1"}
    rows = json.loads((out / "comparison.json").read_text())["rows"]
    assert [r["name"] for r in rows] == ["sdar-sft2", "dipo", "d1x"]
    assert (out / "runs" / "d1x.log").is_file()
