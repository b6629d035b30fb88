"""Frontier pages in real headless Chromium, from file:// with no network: reached from the index, the
Pareto points of the hand-made records (frontier_fixtures.py: one dominated point, a tie) marked, and
every point's link opening its own run's drill-down; on a crowded group (fourteen close strategies, long
run ids) no two point labels overlap and the table fits a 1400 px wide window. Skips only without
playwright or Chromium."""

from __future__ import annotations

import json
import os
import runpy
import shutil
from pathlib import Path
from urllib.parse import urljoin

import pytest

from dare.leaderboards.build import build_site

from .frontier_fixtures import CROWD, EXPECTED, write_crowd_runs, write_frontier_runs

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
CHROMIUM = os.environ.get("DARE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium binary at {CHROMIUM} (apt-get install chromium or set DARE_CHROMIUM)",
                allow_module_level=True)

LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("frontier-site")
    report = build_site([write_frontier_runs(root / "runs")], root / "site", title="frontier fixture")
    assert [f["title"] for f in report.frontiers] == ["tiny-llada · sudoku", "tiny-other · sudoku"]
    return report.out


@pytest.fixture()
def page():
    """A page that fails the test on any console error, page error or request leaving file://."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.on("request", lambda r: requests.append(r.url))
        yield page
        browser.close()
    assert errors == []
    assert [url for url in requests if not url.startswith(("file://", "data:"))] == [], "requests left the page"


def _open_llada(page, site: Path) -> None:
    page.goto((site / "index.html").as_uri())
    page.wait_for_selector("#table tbody tr")
    page.locator("nav#frontiers a", has_text="tiny-llada · sudoku").click()
    page.wait_for_selector("svg.frontier-chart")


def test_index_links_the_overview_and_every_page(page, site):
    page.goto((site / "index.html").as_uri())
    page.wait_for_selector("#table tbody tr")
    assert page.locator("nav#frontiers a").all_inner_texts() == ["all", "tiny-llada · sudoku", "tiny-other · sudoku"]
    page.locator("nav#frontiers").get_by_role("link", name="all", exact=True).click()
    page.wait_for_selector("svg.frontier-chart")
    assert page.title() == "Accuracy-speed frontiers of decoding strategies"
    assert page.locator("svg.frontier-chart").count() == 4  # two charts for each of the two frontiers


def test_the_pareto_points_are_the_dominance_rule_s(page, site):
    _open_llada(page, site)
    speed, nfe = page.locator("svg.frontier-chart").all()
    for chart, column in ((speed, 3), (nfe, 4)):
        assert chart.locator("a.point").count() == len(EXPECTED)
        front = {a.get_attribute("data-label") for a in chart.locator("a.point.front").all()}
        assert front == {label for label, row in EXPECTED.items() if row[column]}
    assert "random" not in {a.get_attribute("data-label") for a in speed.locator("a.point.front").all()}
    table = page.locator("table.frontier-table tbody tr")
    assert table.count() == len(EXPECTED)
    tokens = dict(zip(table.locator("td.strategy").all_inner_texts(), table.locator("td.tps").all_inner_texts()))
    assert tokens == {label: f"{row[1]:.1f}" for label, row in EXPECTED.items()}


def _shows_run(page, key: str) -> None:
    page.wait_for_selector("#sample-list article")  # the record and its samples loaded
    assert page.locator("#run h2").inner_text() == "tiny-llada · sudoku · sudoku"
    run_id = key.rsplit("-", 1)[0]  # the fixture's run ids are already file-name safe: key = id-<hash>
    assert page.locator("#run .sub").inner_text().startswith(f"run {run_id} ·")
    assert page.locator("#run .error").count() == 0


def test_every_point_opens_its_own_run_drill_down(page, site):
    _open_llada(page, site)
    frontier_url = page.url
    targets = {(a.get_attribute("href"), a.get_attribute("data-run"))
               for a in page.locator("svg.frontier-chart a.point").all()}
    assert len(targets) == len(EXPECTED)  # both charts link the same six runs, each to its own page
    for href, key in sorted(targets):
        page.goto(urljoin(frontier_url, href))
        _shows_run(page, key)
    page.goto(frontier_url)  # and a click on a marker follows its link
    margin = page.locator('svg.frontier-chart a.point[data-label="margin"]').first
    key = margin.get_attribute("data-run")
    margin.locator("circle").click()
    _shows_run(page, key)


def test_the_readme_picture_script_rebuilds_a_small_png_from_the_shipped_records(tmp_path, capsys):
    repo = Path(__file__).resolve().parents[2]
    script = runpy.run_path(str(repo / "benchmarks" / "frontier_picture.py"))
    out = tmp_path / "frontier.png"
    assert script["main"](["--records", str(repo / "docs" / "figures" / "frontier"), "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["pages"] == ["tiny-dream-sudoku · sudoku", "tiny-llada-long · long_canvas", "tiny-llada · sudoku",
                               "tiny-sdar · sudoku"] and len(report["machine"]) == 1
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["bytes"] == out.stat().st_size < script["MAX_BYTES_PER_PAGE"] * len(report["pages"])


@pytest.fixture(scope="module")
def crowd_page_file(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("crowd-site")
    report = build_site([write_crowd_runs(root / "runs")], root / "site", title="crowded frontier")
    [entry] = report.frontiers
    return report.out / entry["href"]


def _boxes(chart) -> list[tuple[str, float, float, float, float]]:
    """(text, left, top, right, bottom) of every point label of one chart, as Chromium laid them out."""
    return chart.evaluate("""svg => Array.from(svg.querySelectorAll('text.point-label')).map(t => {
        const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.top, r.right, r.bottom]; })""")


def test_point_labels_of_close_points_never_overlap(page, crowd_page_file, tmp_path):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(crowd_page_file.as_uri())
    charts = page.locator("svg.frontier-chart").all()
    assert len(charts) == 2
    for chart in charts:
        boxes = _boxes(chart)
        frame = chart.evaluate("svg => { const r = svg.getBoundingClientRect(); "
                               "return [r.left, r.top, r.right, r.bottom]; }")
        # Every point is named: by its own label, by the label of a point drawn on the same pixel
        # ("... (+1 same)"), or (no free spot) in the caption under the chart. The fixture is crowded
        # enough that some labels had to move away from their markers.
        unnamed = chart.evaluate("""svg => {
            const caption = svg.closest('figure') ? svg.closest('figure').innerText : '';
            const texts = Array.from(svg.querySelectorAll('text.point-label')).map(t => t.textContent);
            const points = Array.from(svg.querySelectorAll('a.point')).map(a => {
                const c = a.querySelector('circle');
                return [a.dataset.label, c.getAttribute('cx'), c.getAttribute('cy')]; });
            const named = label => texts.some(t => t === label || t.startsWith(label + ' (+'))
                || caption.includes(label);
            return points.filter(([label, x, y]) => !named(label) &&
                !points.some(([other, ox, oy]) => ox === x && oy === y && named(other))).map(p => p[0]); }""")
        assert unnamed == []
        assert len(boxes) >= 10 and chart.locator("line.leader").count() >= 3
        for i, (text, left, top, right, bottom) in enumerate(boxes):
            assert frame[0] <= left and right <= frame[2] and frame[1] <= top and bottom <= frame[3], text
            for other in boxes[i + 1:]:
                overlap = min(right, other[3]) - max(left, other[1]), min(bottom, other[4]) - max(top, other[2])
                assert overlap[0] <= 0 or overlap[1] <= 0, (text, other[0])
    page.screenshot(path=str(tmp_path / "crowded-frontier.png"), full_page=True)


def test_the_frontier_table_fits_a_1400px_window(page, crowd_page_file, tmp_path):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(crowd_page_file.as_uri())
    table = page.locator("table.frontier-table")
    assert table.locator("tbody tr").count() == len(CROWD)
    sizes = page.evaluate("""() => ({page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
        wraps: Array.from(document.querySelectorAll('.table-wrap')).map(w => [w.scrollWidth, w.clientWidth]),
        right: document.querySelector('table.frontier-table').getBoundingClientRect().right})""")
    path = tmp_path / "frontier-table-1400.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0
    assert sizes["page"][0] <= sizes["page"][1], sizes
    assert sizes["wraps"] and all(scroll <= client for scroll, client in sizes["wraps"]), sizes
    assert sizes["right"] <= 1400, sizes
    # TPF and AUP sit in the table: the reference (one token per step) at TPF 1, AUP = 1 x its 74%.
    row = table.locator("tbody tr", has=page.locator("td.strategy", has_text="low_confidence")).filter(
        has_not_text="threshold").filter(has_not_text="klass").first
    assert row.locator("td.tpf").inner_text() == "1.00" and row.locator("td.aup").inner_text() == "74.0"
