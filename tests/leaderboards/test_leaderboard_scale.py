"""Acceptance at scale: 500 runs of 1319 samples build in under a minute, the page stays under 2 MB."""

from __future__ import annotations

import time

import pytest

from dare.leaderboards.build import build_site
from dare.leaderboards.pairdata import baseline_pairs

from .leaderboard_fixtures import build_many_fixture, read_data

pytestmark = pytest.mark.slow


def test_500_runs_of_1319_samples_build_in_under_a_minute(tmp_path):
    build_many_fixture(tmp_path / "runs", 500, 1319)
    started = time.perf_counter()
    report = build_site([tmp_path / "runs"], tmp_path / "site")
    seconds = time.perf_counter() - started
    site = tmp_path / "site"
    page_open = sum(f.stat().st_size
                    for f in [site / "index.html", site / "data" / "index.js", *(site / "assets").iterdir()])
    print(f"\n500 runs x 1319 samples: build {seconds:.1f} s, page opens with {page_open / 1e6:.2f} MB")
    assert report.runs == 500 and report.suites == {"gsm8k": 500}
    assert seconds < 60
    assert page_open < 2_000_000
    index = read_data(site / "data" / "index.js")
    suite = index["suites"][0]
    column = read_data(site / suite["pairs"]["columns"]["gsm8k"])  # what the page pairs any baseline from
    assert len(column["rows"]) == 500 and len(column["totals"][0]) == 1000
    assert len(column["weights"]) == len(column["missing"]) <= 1319  # each run has a few error samples
    started = time.perf_counter()
    pairs = baseline_pairs({"gsm8k": column}, suite["rows"][0]["id"])
    print(f"one baseline's pairs from that data: {time.perf_counter() - started:.2f} s")
    assert len(pairs) == 499 and all("gsm8k" in p for p in pairs.values())
    assert len(list((site / "data" / "samples").iterdir())) == 500
