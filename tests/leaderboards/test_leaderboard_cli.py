"""The ``dare-leaderboard`` command: exit codes, messages, rebuilds."""

from __future__ import annotations

import json

import pytest

from dare.leaderboards.cli import main

from .leaderboard_fixtures import RunSpec, write_broken_runs, write_run


@pytest.fixture()
def two_runs(tmp_path):
    write_run(tmp_path / "runs", RunSpec("a", "math", "model-a", {"gsm8k": 20}, 0.5))
    write_run(tmp_path / "runs", RunSpec("b", "math", "model-b", {"gsm8k": 20}, 0.6))
    return tmp_path


def test_build_writes_a_site_and_rebuilds_in_place(two_runs, capsys):
    out = two_runs / "site"
    assert main(["build", "--runs", str(two_runs / "runs"), "--out", str(out), "--title", "My <board>"]) == 0
    assert "from 2 runs" in capsys.readouterr().out
    assert "My &lt;board&gt;" in (out / "index.html").read_text()
    write_run(two_runs / "runs", RunSpec("c", "math", "model-c", {"gsm8k": 20}, 0.7))
    assert main(["build", "--runs", str(two_runs / "runs"), "--out", str(out), "--baseline", "model-a", "-q"]) == 0
    assert len(json.loads((out / "leaderboard.json").read_text())["rows"]) == 6
    assert not list(two_runs.glob(".site.*")), "no staging folder is left behind"


def test_unknown_baseline_is_a_user_error_listing_the_models(two_runs, capsys):
    code = main(["build", "--runs", str(two_runs / "runs"), "--out", str(two_runs / "site"), "--baseline", "nope"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--baseline 'nope' matches no model" in err and "model-a, model-b" in err
    assert not (two_runs / "site").exists()


def test_no_valid_records_is_a_user_error(tmp_path, capsys):
    write_broken_runs(tmp_path / "runs")
    assert main(["build", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "site")]) == 2
    assert "no valid run record" in capsys.readouterr().err
    assert main(["build", "--runs", str(tmp_path / "missing"), "--out", str(tmp_path / "site")]) == 2


def test_refuses_to_replace_a_folder_that_is_not_a_leaderboard(two_runs, capsys):
    precious = two_runs / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    assert main(["build", "--runs", str(two_runs / "runs"), "--out", str(precious)]) == 2
    assert "not a dare leaderboard" in capsys.readouterr().err
    assert (precious / "notes.txt").read_text() == "keep me"


def test_records_with_non_finite_metrics_or_escaping_sample_paths_are_contained(two_runs, caplog):
    record_path = two_runs / "runs" / "a" / "run.json"
    record = json.loads(record_path.read_text())
    record["metrics"]["gsm8k"]["accuracy"]["value"] = float("nan")
    record_path.write_text(json.dumps(record))  # json writes NaN, which Python's reader accepts
    other = two_runs / "runs" / "b" / "run.json"
    record = json.loads(other.read_text())
    record["samples_path"] = "../a/samples.jsonl"
    other.write_text(json.dumps(record))
    assert main(["build", "--runs", str(two_runs / "runs"), "--out", str(two_runs / "site"), "-q"]) == 0
    messages = " | ".join(r.getMessage() for r in caplog.records)
    assert "a/run.json: metrics.gsm8k.accuracy is not a finite number" in messages
    assert "outside its directory" in messages
    assert not (two_runs / "site" / "data" / "samples").exists()


def test_the_build_benchmark_prints_its_figures_as_one_json_line(tmp_path, capsys):
    """benchmarks/leaderboard_build.py at toy size: like every benchmark, one JSON object on the last line."""
    from ..scripts import run_benchmark

    assert run_benchmark("leaderboard_build.py", "--runs", "3", "--samples", "5", "--keep",
                         str(tmp_path / "bench")) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["runs"] == 3 and report["samples_per_run"] == 5 and report["rows"] == 3
