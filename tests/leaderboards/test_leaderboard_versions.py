"""A leaderboard column is a benchmark on one dataset version: MBPP+ v0.1.0 (399 tasks) and v0.2.0 (378) never
share a column, a comparability reference or a suite mean; records written before ``dataset_version`` are placed
by their data sha256."""

from __future__ import annotations

import csv

from dare.leaderboards.build import build_site

from .leaderboard_fixtures import RunSpec, read_data, sha, write_run

V1, V2 = "v0.1.0", "v0.2.0"
SHA = {V1: sha("mbppplus 399"), V2: sha("mbppplus 378")}


def mbppplus(run_id: str, model: str, version: str | None, data: str, **more) -> RunSpec:
    return RunSpec(run_id, "code", model, {"mbppplus": 40}, 0.5, data_sha_override={"mbppplus": data},
                   dataset_versions={"mbppplus": version} if version else {}, **more)


def build(tmp_path, *specs: RunSpec) -> dict:
    for spec in specs:
        write_run(tmp_path / "runs", spec)
    report = build_site([tmp_path / "runs"], tmp_path / "site", n_boot=50)
    index = read_data(report.out / "data" / "index.js")
    return next(s for s in index["suites"] if s["name"] == "code")


def by_model(suite: dict) -> dict[str, dict]:
    return {row["model"]: row for row in suite["rows"]}


def test_two_dataset_versions_are_two_columns_with_the_version_in_the_header(tmp_path):
    suite = build(tmp_path, mbppplus("r1", "model-a", V1, SHA[V1]), mbppplus("r2", "model-b", V2, SHA[V2]),
                  mbppplus("r3", "model-c", V2, SHA[V2], created_at="2026-11-21T10:00:00Z"))
    assert [(c["id"], c["label"]) for c in suite["columns"]] == [
        ("mbppplus@v0.1.0", "mbppplus v0.1.0"), ("mbppplus@v0.2.0", "mbppplus v0.2.0")]
    rows = by_model(suite)
    assert set(rows["model-a"]["cells"]) == {"mbppplus@v0.1.0"}
    assert set(rows["model-b"]["cells"]) == set(rows["model-c"]["cells"]) == {"mbppplus@v0.2.0"}  # same: one column
    cell = rows["model-b"]["cells"]["mbppplus@v0.2.0"]
    assert (cell["b"], cell["ver"], cell["ver_inferred"]) == ("mbppplus", V2, False)
    # each version is its own comparability column: no "≠ data" flag across releases
    assert all(c["flags"] == [] for row in suite["rows"] for c in row["cells"].values())
    # a mean over one release is not comparable with a mean over the other: no row covers both, none is averaged
    assert all(row["mean"]["value"] is None for row in suite["rows"])
    assert rows["model-a"]["mean"]["missing"] == ["mbppplus@v0.2.0"]


def test_one_model_on_both_versions_gets_both_cells_in_one_row(tmp_path):
    suite = build(tmp_path, mbppplus("r1", "model-a", V1, SHA[V1]), mbppplus("r2", "model-a", V2, SHA[V2]))
    (row,) = suite["rows"]
    assert {key: cell["run"].split("-")[0] for key, cell in row["cells"].items()} == {
        "mbppplus@v0.1.0": "r1", "mbppplus@v0.2.0": "r2"}
    assert all(cell["others"] == 0 for cell in row["cells"].values()), "neither run supersedes the other"
    assert row["mean"]["value"] is not None


def test_old_records_take_the_version_recorded_for_their_bytes_or_stay_unknown(tmp_path):
    suite = build(tmp_path, mbppplus("r1", "model-a", V2, SHA[V2]),
                  mbppplus("r2", "model-old", None, SHA[V2]),  # the same bytes as the v0.2.0 run
                  mbppplus("r3", "model-older", None, SHA[V1]))  # bytes no versioned run recorded
    assert [c["label"] for c in suite["columns"]] == ["mbppplus (version unknown)", "mbppplus v0.2.0"]
    rows = by_model(suite)
    old = rows["model-old"]["cells"]["mbppplus@v0.2.0"]
    assert old["ver"] == V2 and old["ver_inferred"] is True and old["flags"] == []
    assert set(rows["model-older"]["cells"]) == {"mbppplus"}
    assert rows["model-older"]["cells"]["mbppplus"]["ver"] is None
    with (tmp_path / "site" / "leaderboard.csv").open() as handle:
        lines = {line["model"]: line for line in csv.DictReader(handle) if line["benchmark"] == "mbppplus"}
    assert (lines["model-a"]["dataset_version"], lines["model-a"]["dataset_version_inferred"]) == (V2, "False")
    assert (lines["model-old"]["dataset_version"], lines["model-old"]["dataset_version_inferred"]) == (V2, "True")
    assert lines["model-older"]["dataset_version"] == ""


def test_bytes_recorded_under_two_versions_name_no_version_for_an_old_record(tmp_path):
    suite = build(tmp_path, mbppplus("r1", "model-a", V1, SHA[V1]), mbppplus("r2", "model-b", V2, SHA[V1]),
                  mbppplus("r3", "model-old", None, SHA[V1]))
    assert set(by_model(suite)["model-old"]["cells"]) == {"mbppplus"}
