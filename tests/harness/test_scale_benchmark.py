"""benchmarks/scale.py at toy sizes: a real replay run per size in its own process, a leaderboard build, the
verdict cache; one JSON object on the last line and the figure as SVG."""

from __future__ import annotations

import json

from ..scripts import run_benchmark


def test_scale_benchmark_prints_its_figures(tmp_path, capsys):
    assert run_benchmark("scale.py", "--samples", "20", "40", "--runs", "2", "4", "--run-samples", "3",
                         "--verdicts", "200", "--svg", str(tmp_path / "scale.svg")) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [r["samples"] for r in report["replay"]] == [20, 40] and all(r["peak_rss_mib"] > 0 for r in report["replay"])
    assert [r["records"] for r in report["leaderboard"]] == [2, 4]
    assert report["verdict_cache"]["entries"] == 200 and report["replay_peak_rss_ratio"] > 0
    figure = (tmp_path / "scale.svg").read_text()
    assert figure.startswith("<svg") and "polyline" in figure
