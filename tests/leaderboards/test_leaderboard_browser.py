"""The built site driven in real headless Chromium, loaded from file:// with no network.

Waits use locators (``expect``), not ``wait_for_function``: the page's Content-Security-Policy forbids
the eval that a string predicate needs, and the tests keep that policy on. Skips (with the reason) only where
the Python ``playwright`` package or a Chromium binary is missing.
Screenshots land in test-artifacts/leaderboard/ (the README's picture is of real records instead:
benchmarks/leaderboard_picture.py).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from .leaderboard_fixtures import RunSpec, read_data, write_run
from .pair_reference import assert_pairs_match, reference_pairs

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
CHROMIUM = os.environ.get("DARE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium binary at {CHROMIUM} (apt-get install chromium or set DARE_CHROMIUM)",
                allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "leaderboard"
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser, request):
    """A page that records console errors and every request; the test fails if either is non-empty."""
    context = browser.new_context(viewport={"width": 1500, "height": 950})
    page = context.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    yield page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert errors == []
    leaving = [url for url in requests if not url.startswith(("file://", "data:"))]
    assert leaving == [], "requests left the page"


def open_board(page, built, fragment: str = "") -> None:
    page.goto((built.site / "index.html").as_uri() + fragment)
    page.wait_for_selector("#table tbody tr")


def expect_last_heads(page, texts: list[str]) -> None:
    """The table head's last ``len(texts)`` cells read ``texts`` once laid out: innerText follows layout, which a
    loaded machine may not have finished when the rows are already there, so this waits rather than reads."""
    heads = page.locator(f"#table thead th:nth-last-child(-n+{len(texts)})")
    sync_api.expect(heads).to_have_text(texts, use_inner_text=True)


def visible_models(page) -> list[str]:
    return page.locator("#table tbody tr td.model .name").all_inner_texts()


def model_row(page, model: str):
    return page.locator("#table tbody tr", has=page.locator("td.model .name", has_text=model)).first


def page_pairs(page, baseline: str) -> dict:
    """The pairs the page holds for ``baseline`` (computed there, or the build's precomputed file), once it
    holds them: a table drawn for the baseline can come before its pairs are in (then its cells fill in)."""
    page.wait_for_function("id => DARE.store.pairs[id] !== undefined", arg=baseline)
    return page.evaluate("id => DARE.store.pairs[id]", baseline)


def test_pairs_the_page_computes_equal_the_all_pairs_statistics(page, built):
    """Baselines that are not the build's: a complete row, a partial run (half the items of two of three
    benchmarks) and a row on another math500 data file; rows that miss items pair on the shared ones."""
    compared = 0
    for suite, model in (("math", "llada-8b-d1"), ("math", "llada-8b-spg"), ("math", "sdar-1.7b-chat"),
                         ("planning", "tiny-llada")):
        row = built.rows(suite, model)[0]
        open_board(page, built, f"#suite={suite}&baseline={row['id']}")
        sync_api.expect(page.locator("tr.baseline td.model .name")).to_have_text(model)
        page.wait_for_selector("td.delta:not(.unpaired)")
        got = page_pairs(page, row["id"])
        compared += assert_pairs_match(got, built.reference_pairs(suite, row["id"]))
        for other, stats in got.items():  # the cells show those numbers, in points with one decimal
            for column, (delta, *_rest) in stats.items():
                where = "td.mean" if column == "_mean" else f'td[data-column="{column}"]'
                text = page.locator(f'tr[data-row="{other}"] {where} .v').inner_text()
                shown = float(text.removeprefix("Δ ").removesuffix(" *").replace("−", "-"))
                assert abs(shown - 100 * delta) <= 0.05 + 1e-9, (other, column, text, delta)
    assert compared > 60


def test_pairs_of_averaged_scores_get_an_interval_and_no_mcnemar(page, tmp_path):
    """Two generations per item (pass@1 averages them: 0, 0.5 or 1): not 0/1 verdicts, so no McNemar."""
    from dare.leaderboards.build import build_site

    specs = [RunSpec(f"k2-{i}", "math", f"model-{i}", {"gsm8k": 40}, skill, used_fraction=fraction)
             for i, (skill, fraction) in enumerate(((0.5, 1.0), (0.7, 1.0), (0.6, 0.5)))]
    for spec in specs:
        samples = write_run(tmp_path / "runs", spec) / "samples.jsonl"
        lines = [json.loads(line) for line in samples.read_text().splitlines()]
        second = [{**line, "index": 1, "passed": not line["passed"] if i % 3 else line["passed"]}
                  for i, line in enumerate(lines)]
        samples.write_text("".join(json.dumps(line) + "\n" for line in lines + second))
    report = build_site([tmp_path / "runs"], tmp_path / "site", n_boot=200)
    index = read_data(report.out / "data" / "index.js")
    rows = {r["model"]: r["id"] for r in index["suites"][0]["rows"]}
    page.goto((report.out / "index.html").as_uri() + f"#baseline={rows['model-2']}")
    page.wait_for_selector("td.delta:not(.unpaired)")
    got = page_pairs(page, rows["model-2"])
    want = reference_pairs(tmp_path / "runs", "math", rows["model-2"], n_boot=200)
    assert assert_pairs_match(got, want) == 4
    assert all(stats[3] is None for pairs in got.values() for stats in pairs.values())
    assert {stats["gsm8k"][4] for stats in got.values()} == {20}


def test_board_loads_offline_with_deltas_against_the_flag_baseline(page, built):
    open_board(page, built)
    assert page.title() == "DARE leaderboard (synthetic fixture)"
    assert page.locator("nav#suites button").all_inner_texts() == ["math (9)", "planning (4)"]
    assert page.locator("#table tbody tr").count() == 9
    page.wait_for_selector("td.delta")
    assert page.locator("tr.baseline td.model .name").inner_text() == "llada-8b-instruct"
    assert page.locator("td.noncomparable").count() == sum(
        any(f["severity"] == "major" for f in c["flags"])
        for r in built.suite("math")["rows"] for c in r["cells"].values())
    assert page.locator("svg.spark").count() == 3
    pairs = read_data(built.site / "data" / "pairs" / f"{built.index['baseline']['math']}.js")
    marked = 0
    for row in built.suite("math")["rows"]:
        for bench, stats in pairs.get(row["id"], {}).items():
            if bench == "_mean":
                continue
            _, lo, hi, p, _ = stats
            significant = p < 0.05 if p is not None else (lo > 0 or hi < 0)
            text = page.locator(f'tr[data-row="{row["id"]}"] td[data-bench="{bench}"] .v').inner_text()
            assert text.endswith(" *") == significant, (row["model"], bench, text, stats)
            marked += significant
    assert marked >= 3
    page.click('nav#suites button[data-suite="planning"]')
    sync_api.expect(page.locator("#table tbody tr")).to_have_count(4)
    expect_last_heads(page, [  # the fixture's runs record no version
        "countdown · accuracy\nversion unknown", "sudoku · accuracy\nversion unknown", "Suite mean ▼"])


def test_sorting_by_a_column_changes_the_visible_order(page, built):
    open_board(page, built, "#baseline=none&group=0")
    before = visible_models(page)
    rows = built.suite("math")["rows"]
    by_gsm8k = sorted(rows, key=lambda r: -r["cells"]["gsm8k"]["v"])
    page.click('th[data-sort="gsm8k"]')
    page.wait_for_selector('th.sorted[data-sort="gsm8k"]')
    descending = visible_models(page)
    assert descending == [r["model"] for r in by_gsm8k] and descending != before
    page.click('th[data-sort="gsm8k"]')
    page.wait_for_selector('th[data-sort="gsm8k"][aria-sort="ascending"]')
    assert visible_models(page) == descending[::-1]
    page.click('th[data-sort="model"]')
    page.wait_for_selector('th.sorted[data-sort="model"]')
    assert visible_models(page) == sorted(descending, reverse=True)
    page.focus('th[data-sort="gsm8k"] button')  # headers are buttons: sorting works from the keyboard
    page.keyboard.press("Enter")
    page.wait_for_selector('th.sorted[data-sort="gsm8k"]')
    assert visible_models(page) == descending


def test_grouping_keeps_the_decodings_of_a_model_together(page, built):
    open_board(page, built, "#baseline=none")
    names = visible_models(page)
    first = names.index("llada-8b-instruct")
    assert names[first + 1] == "↳ llada-8b-instruct"


def test_filters_by_family_algorithm_backend_and_text(page, built):
    open_board(page, built, "#baseline=none")
    page.select_option("#f-family", "dream")
    sync_api.expect(page.locator("#table tbody tr")).to_have_count(2)
    assert sorted(visible_models(page)) == ["dream-7b-coupled-grpo", "dream-7b-instruct"]
    page.select_option("#f-family", "")
    page.select_option("#f-algorithm", "d1")
    sync_api.expect(page.locator("#table tbody tr")).to_have_count(1)
    assert visible_models(page) == ["llada-8b-d1"]
    page.select_option("#f-algorithm", "")
    page.select_option("#f-backend", "lmdeploy")
    sync_api.expect(page.locator("#table tbody tr")).to_have_count(1)
    assert visible_models(page) == ["sdar-8b-chat"]
    page.select_option("#f-backend", "")
    page.fill("#q", "mdpo")
    sync_api.expect(page.locator("#table tbody tr")).to_have_count(1)
    assert visible_models(page) == ["llada-8b-mdpo"]
    page.fill("#q", "no such model")
    page.wait_for_selector("#empty:not([hidden])")


def test_baseline_toggle_turns_cells_into_paired_deltas(page, built):
    open_board(page, built, "#baseline=none")
    assert page.locator("td.delta").count() == 0
    d1 = built.rows("math", "llada-8b-d1")[0]
    model_row(page, "llada-8b-d1").locator('input[type="radio"]').check()
    page.wait_for_selector("td.delta")
    assert page.locator("tr.baseline td.model .name").inner_text() == "llada-8b-d1"
    assert not (built.site / "data" / "pairs" / f"{d1['id']}.js").exists(), "only the build's baseline is precomputed"
    pairs = page_pairs(page, d1["id"])
    base_a = model_row(page, "llada-8b-instruct")
    delta = pairs[built.rows("math", "llada-8b-instruct")[0]["id"]]["gsm8k"]
    text = base_a.locator('td[data-bench="gsm8k"] .v').inner_text()
    assert text == f"Δ {100 * delta[0]:+.1f}".replace("-", "−") + " *"  # significantly worse than d1
    assert "down" in base_a.locator('td[data-bench="gsm8k"]').get_attribute("class")
    # "Δ vs base" on a trained row makes its base model the baseline.
    model_row(page, "llada-8b-mdpo").locator("button.vs-base").click()
    sync_api.expect(page.locator("tr.baseline td.model .name")).to_have_text("llada-8b-instruct")
    page.select_option("#baseline", "none")
    sync_api.expect(page.locator("td.delta")).to_have_count(0)


def test_a_cell_opens_its_run_and_paged_filterable_samples(page, built):
    open_board(page, built, "#baseline=none")
    model_row(page, "llada-8b-d1").locator('td[data-bench="gsm8k"] button').click()
    page.wait_for_selector("#sample-list article")
    assert page.locator("#run h2").inner_text() == "llada-8b-d1 · math · gsm8k"
    run_text = page.locator("#run").inner_text()
    assert "dataset version\tnot recorded" in run_text  # the fixture's runs predate dataset_version
    for fact in ("config_hash", "data sha256", "Prompt template", "git_commit", "fingerprint", "verifier"):
        assert fact in run_text, fact
    assert "undefined" not in run_text and "20 points (plotted above)" in run_text
    assert page.locator("svg.curve").count() == 2
    assert page.locator("#sample-list article").count() == 25
    assert "page 1 of 5 · 120 of 120 samples" in page.inner_text("#page-info")
    page.click("#next-page")
    page.wait_for_selector("text=page 2 of 5")
    page.click('button.filter[data-verdict="error"]')
    page.wait_for_selector("text=page 1 of 1")
    assert page.locator("#sample-list article").evaluate_all("a => a.map(x => x.dataset.verdict)") == ["error"]
    page.click('button.filter[data-verdict="fail"]')
    page.wait_for_selector('button.filter.active[data-verdict="fail"]')
    verdicts = page.locator("#sample-list article").evaluate_all("a => a.map(x => x.dataset.verdict)")
    assert verdicts and set(verdicts) == {"fail"}
    page.click('button.filter[data-verdict="all"]')
    page.fill("#sample-search", "gsm8k-0007")
    page.press("#sample-search", "Enter")
    page.wait_for_selector("text=1 of 120 samples")
    assert page.locator("#sample-list article").get_attribute("data-id") == "gsm8k-0007"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "run_page_with_samples.png"), full_page=True)
    page.click("a.back")
    page.wait_for_selector("#table tbody tr")


def test_a_1319_sample_cell_opens_and_pages_quickly(page, tmp_path):
    write_run(tmp_path / "runs", RunSpec("big", "gsm8k", "llada-8b-instruct", {"gsm8k": 1319}, 0.5))
    from dare.leaderboards.build import build_site
    report = build_site([tmp_path / "runs"], tmp_path / "site")
    page.goto((report.out / "index.html").as_uri())
    page.wait_for_selector("#table tbody tr")
    started = time.perf_counter()
    page.click('td[data-bench="gsm8k"] button')
    page.wait_for_selector("text=of 1319 samples")
    opened = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(5):
        page.click("#next-page")
    page.wait_for_selector("text=page 6 of 53")
    paged = time.perf_counter() - started
    assert opened < 3.0 and paged < 3.0, (opened, paged)


def test_a_replayed_k2_run_shows_pass_at_2_and_a_readable_drill_down(page, tmp_path):
    """A real ``dare-eval --backend replay`` run with k = 2 (one correct, one wrong completion per problem)."""
    from dare.harness.data import load_samples
    from dare.leaderboards.build import build_site

    from ..harness.helpers import dare_eval, run_record, write_completions

    samples = load_samples("humaneval.jsonl")[:2]
    rows = [(s.id, c) for s in samples for c in (s.reference, "    return None\n")]
    completions = write_completions(tmp_path / "k2.jsonl", rows)
    run_record(dare_eval("--backend", "replay", "--suite", "humaneval", "--limit", "2",
                         "--completions", str(completions),
                         "--out", str(tmp_path / "runs"), "--set", f"verifier.cache_dir={tmp_path / 'cache'}"))
    report = build_site([tmp_path / "runs"], tmp_path / "site")
    page.goto((report.out / "index.html").as_uri())
    page.wait_for_selector("#table tbody tr")
    version = "openai/human-eval 2021"  # the run records it; the header shows it under the name
    expect_last_heads(page, [f"humaneval · pass@1\n{version}", f"humaneval · pass@2\n{version}", "Suite mean ▼"])
    assert page.locator('td[data-metric="pass@2"] .v').inner_text() == "100.0"
    assert page.locator('td[data-bench="humaneval"]:not([data-metric]) .v').inner_text() == "50.0"
    page.click('td[data-bench="humaneval"]:not([data-metric]) button')
    page.wait_for_selector("#sample-list article")
    counts = page.locator("table.counts")
    assert counts.locator("th").all_inner_texts()[:6] == ["benchmark", "scored", "error", "unscored", "generated",
                                                          "cached"]
    assert counts.locator("tr").nth(1).locator("td").all_inner_texts()[:6] == ["humaneval", "2", "0", "0", "4", "0"]
    isolation = page.locator("section.kv", has=page.locator("h3", has_text="Isolation"))
    layers = isolation.locator("li").all_inner_texts()
    assert "parent clocks (job, load, each test) kill from outside" in layers
    run_text = page.locator("#run").inner_text()
    assert f"dataset version\t{version}" in run_text
    assert '{"' not in run_text and "\\n" not in run_text, "no raw JSON and no literal \\n in the drill-down"
    reference = page.locator("#sample-list article").first.locator(".answer.reference pre").inner_text()
    assert reference.startswith("    for idx, elem in enumerate(numbers):\n        for idx2")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "replay_k2_run_page.png"), full_page=True)


def test_the_delta_vs_base_button_does_not_overlap_the_base_link(page, built):
    open_board(page, built, "#baseline=none")
    trained = page.locator("td.training", has=page.locator("button.vs-base"))
    assert trained.count() >= 3
    for i in range(trained.count()):
        cell = trained.nth(i)
        link, button = cell.locator("a.base-link").bounding_box(), cell.locator("button.vs-base").bounding_box()
        overlap_x = min(link["x"] + link["width"], button["x"] + button["width"]) - max(link["x"], button["x"])
        overlap_y = min(link["y"] + link["height"], button["y"] + button["height"]) - max(link["y"], button["y"])
        assert overlap_x <= 0 or overlap_y <= 0, (i, link, button)
        assert button["y"] >= link["y"] + link["height"] - 0.5, "the button sits below the link"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    trained.first.screenshot(path=str(ARTIFACTS / "training_cell.png"))


def test_hatching_follows_the_build_baseline_and_the_legend_names_it(page, tmp_path):
    from dare.leaderboards.build import build_site

    from .test_leaderboard_reference import DECODING_X, DECODING_Y, tie_runs

    first, second = sorted([DECODING_X, DECODING_Y], key=lambda d: d.config_hash(), reverse=True)
    tie_runs(tmp_path / "runs", first, second)
    report = build_site([tmp_path / "runs"], tmp_path / "site", baseline="base-model")
    page.goto((report.out / "index.html").as_uri() + "#baseline=none")
    page.wait_for_selector("#table tbody tr")
    for model, hatched in (("base-model", 0), ("twin-model", 0), ("other-model", 2), ("other-model-2", 2)):
        assert model_row(page, model).locator("td.noncomparable").count() == hatched, model
    assert "reference, the build's baseline “base-model”" in page.inner_text("#legend")


def test_a_baseline_picked_on_the_page_becomes_the_hatching_reference(page, tmp_path):
    from dare.leaderboards.build import build_site

    from .test_leaderboard_reference import DECODING_X, DECODING_Y, tie_runs

    tie_runs(tmp_path / "runs", DECODING_X, DECODING_Y)  # the DECODING_Y pair is older: the rule's reference
    report = build_site([tmp_path / "runs"], tmp_path / "site")
    page.goto((report.out / "index.html").as_uri())
    page.wait_for_selector("#table tbody tr")
    expected = {"base-model": 2, "twin-model": 2, "other-model": 0, "other-model-2": 0}
    assert {m: model_row(page, m).locator("td.noncomparable").count() for m in expected} == expected
    assert "the oldest complete run of an untrained model" in page.inner_text("#legend")
    model_row(page, "base-model").locator('input[type="radio"]').check()
    page.wait_for_selector("tr.baseline")
    expected = {"base-model": 0, "twin-model": 0, "other-model": 2, "other-model-2": 2}
    assert {m: model_row(page, m).locator("td.noncomparable").count() for m in expected} == expected
    title = model_row(page, "other-model").locator('td[data-bench="countdown"]').get_attribute("title")
    assert (f"decoding {DECODING_Y.config_hash()[:12]} differs from the baseline's {DECODING_X.config_hash()[:12]}"
            in title)


def test_two_dataset_versions_are_two_headed_columns_and_a_cell_opens_its_benchmark(page, tmp_path):
    from dare.leaderboards.build import build_site

    from .test_leaderboard_versions import SHA, V1, V2, mbppplus

    for spec in (mbppplus("r1", "model-a", V1, SHA[V1]), mbppplus("r2", "model-b", V2, SHA[V2])):
        write_run(tmp_path / "runs", spec)
    report = build_site([tmp_path / "runs"], tmp_path / "site", n_boot=50)
    page.goto((report.out / "index.html").as_uri())
    page.wait_for_selector("#table tbody tr")
    expect_last_heads(page, ["mbppplus · accuracy\nv0.1.0", "mbppplus · accuracy\nv0.2.0", "Suite mean ▼"])
    cell = model_row(page, "model-b").locator('td[data-column="mbppplus@v0.2.0"]')
    assert "dataset v0.2.0" in cell.get_attribute("title")
    assert model_row(page, "model-b").locator('td[data-column="mbppplus@v0.1.0"]').inner_text() == "—"
    page.click('th[data-sort="mbppplus@v0.2.0"] button')  # sorting by a versioned column
    sync_api.expect(page.locator("#table tbody tr").first.locator("td.model .name")).to_have_text("model-b")
    cell.locator("button").click()
    page.wait_for_selector("#sample-list article")
    assert page.locator("#run h2").inner_text() == "model-b · code · mbppplus"


def test_rows_of_a_frontier_group_show_tpf_and_aup_and_open_their_group(page, built):
    open_board(page, built, "#baseline=none")
    expect_last_heads(page, ["TPF · AUP"])
    rows = {r["decoding"].split(" · ")[0]: r for r in built.suite("math")["rows"] if r["speed"]}
    reference = page.locator(f'tr[data-row="{rows["steps 256"]["id"]}"] td.speed')
    assert reference.locator(".v").inner_text() == "TPF 1.00"
    assert reference.locator(".aup").inner_text() == f"AUP {rows['steps 256']['speed']['aup']:.1f}"
    fast = page.locator(f'tr[data-row="{rows["steps 128"]["id"]}"] td.speed .aup.undefined')
    assert fast.inner_text() == "AUP undefined" and fast.get_attribute("title").startswith("aime2024: accuracy")
    assert page.locator("td.speed.missing").count() == len(built.suite("math")["rows"]) - 2
    group = rows["steps 256"]["speed"]["group"]
    reference.locator("a").click()
    page.wait_for_selector(f"section#g-{group} table.frontier-table")
    assert page.url.endswith(f"#g-{group}")
