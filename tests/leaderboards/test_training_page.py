"""The training page on the kept records of the masked-diffusion comparison (docs/figures/compare/compare-masked:
four algorithms x three seeds from one SFT start; the newer ones, rerun on another CPU, are in
compare-masked-xeon): one setting per algorithm with its seeds, the mean and band computed from each seed's
own training log, read here independently, and the page reached from the index."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

from dare.leaderboards.build import build_site
from dare.leaderboards.loading import load_runs
from dare.leaderboards.training_page import SERIES, band, settings, training_rows

KEPT = Path(__file__).resolve().parents[2] / "docs" / "figures" / "compare" / "compare-masked"
ALGORITHMS = ("coupled_grpo", "d1", "mdpo", "spg")  # the ones with three seeds


@pytest.fixture(scope="module")
def runs():
    return load_runs([KEPT]).runs


def _log(algorithm: str, seed: int) -> list[dict]:
    path = KEPT / "runs" / f"{algorithm}-s{seed}" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_one_setting_per_algorithm_with_its_three_seeds(runs):
    found = {s.algorithm: s for s in settings(runs) if s.algorithm in ALGORITHMS}
    assert sorted(found) == list(ALGORITHMS)
    for algorithm, setting in found.items():
        assert sorted(setting.runs) == [0, 1, 2], algorithm  # the seed is not part of the setting
        assert setting.start == "tiny-llada-sft550" and setting.suite == "sudoku"
        assert {run.record.model.training.run for run in setting.runs.values()} == {
            f"{algorithm}-s{seed}" for seed in (0, 1, 2)}


def test_rows_come_from_the_training_log_with_every_series(runs):
    run = next(r for r in runs if (r.record.model.training.run or "") == "d1-s1")
    rows = training_rows(run)
    assert rows == _log("d1", 1)  # the full log, not the record's three-series curve
    assert {"kl_ref", "clip_fraction"} <= set(rows[0])


@pytest.mark.parametrize("series", ["reward", "kl_ref", "clip_fraction", "accuracy"])
def test_mean_and_band_over_seeds_equal_the_logs(runs, series):
    setting = next(s for s in settings(runs) if s.algorithm == "d1")
    data = band(setting.rows, series)
    logs = [{r["step"]: r[series] for r in _log("d1", seed)} for seed in (0, 1, 2)]
    assert data.steps == sorted(logs[0]) and data.seeds == [0, 1, 2]
    for i, step in enumerate(data.steps):
        values = [log[step] for log in logs]
        assert data.mean[i] == pytest.approx(statistics.fmean(values))
        assert (data.low[i], data.high[i]) == (min(values), max(values))
    assert any(lo < hi for lo, hi in zip(data.low, data.high))  # the seeds differ: a band, not a line


def test_a_series_no_run_logged_has_no_panel(runs):
    spg = next(s for s in settings(runs) if s.algorithm == "spg")
    assert band(spg.rows, "kl_ref") is None and band(spg.rows, "reward") is not None


def test_page_linked_from_the_index_with_a_panel_per_logged_series(runs, tmp_path):
    """With the two-seed runs redone on another CPU beside them: a section per algorithm whatever its seeds."""
    folders = [KEPT, KEPT.with_name("compare-masked-xeon")]
    for folder in folders:
        shutil.copytree(folder, tmp_path / "kept" / folder.name)
    report = build_site([tmp_path / "kept" / folder.name for folder in folders], tmp_path / "site")
    index = (report.out / "index.html").read_text()
    assert 'href="training/index.html"' in index
    page = (report.out / "training" / "index.html").read_text()
    sections = re.findall(r'<div class="training-setting"><h3>(.*?) <span', page)
    kept = sorted({run.name.rsplit("-s", 1)[0] for folder in folders for run in (folder / "runs").iterdir()
                   if run.is_dir()})
    assert set(ALGORITHMS) < set(kept)
    assert sorted(s.replace("<wbr>", "") for s in sections if "sft" not in s) == kept
    d1 = page.split('<div class="training-setting"><h3>d1 ')[1].split('<div class="training-setting">')[0]
    assert d1.count('class="training-chart"') == 4 and "KL to reference" in d1 and "clip fraction" in d1
    assert d1.count('<polygon class="band"') == 4
    assert "connect-src 'none'" in page  # the frontier pages' CSP: nothing leaves the page


def test_page_in_chromium_from_the_index(runs, tmp_path):
    """Reached from the index header, every panel drawn, and no wider than a 1400 px window."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    from .test_frontier_browser import CHROMIUM, LAUNCH_ARGS

    source = tmp_path / "kept"
    shutil.copytree(KEPT, source)
    report = build_site([source], tmp_path / "site")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((report.out / "index.html").as_uri())
        page.locator("nav#training a").click()
        page.wait_for_selector("svg.training-chart")
        assert page.url.endswith("training/index.html")
        logged = sum(band(s.rows, key) is not None for s in settings(runs) for key, _, _ in SERIES)
        assert page.locator("svg.training-chart polyline.mean").count() == logged >= 13
        assert page.locator("svg.training-chart polygon.band").count() == logged
        assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        browser.close()
    assert errors == []
