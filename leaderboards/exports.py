"""The table as plain data: the JSON the page embeds, and CSV/JSON exports written beside the HTML.

The export is long-format (one line per row, column and shown metric, plus a ``mean`` line per row), because
suites have different columns; ``pandas.read_csv(...).pivot(...)`` gives the wide table back. A column is a
benchmark on one dataset version: ``benchmark`` and ``dataset_version`` (empty: unknown) together name it.

Speed without a stopwatch rides along where a run is a point of a frontier group (:mod:`.frontier`: runs
that share everything but the decoding strategy): ``tpf`` (tokens per forward) and ``aup`` (accuracy under
parallelism within that group, :mod:`.frontier_aup`) of the cell's benchmark, and on the ``mean`` line the
suite's TPF and the mean AUP; ``aup_undefined`` says why an AUP is missing, ``frontier_group`` names the
group (its section id on the frontier page is ``g-<frontier_group>``). Other rows leave them empty.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from .frontier import Frontier, page_name
from .table import Cell, Row, SuiteTable

EXPORT_COLUMNS = (
    "suite", "row", "model", "family", "algorithm", "training_run", "training_step", "backend", "decoding_hash",
    "benchmark", "dataset_version", "dataset_version_inferred", "metric", "value", "ci_low", "ci_high", "n",
    "run_id", "run_status", "data_sha256", "verifier", "comparable", "flags",
    "tpf", "aup", "aup_undefined", "frontier_group",
)
Speeds = dict[str, dict[str, Any]]  # run key -> its frontier point's TPF and AUP (see speeds_by_run)


def speeds_by_run(frontiers: list[Frontier]) -> Speeds:
    """Run key -> TPF, AUP (None with ``note``), frontier group, its page section, and per benchmark the same."""
    speeds = {}
    for frontier in frontiers:
        page = page_name(frontier.shared["model"], frontier.shared["suite"]) + f"#g-{frontier.key}"
        for point in frontier.points:
            speeds[point.run.key] = {
                "group": frontier.key, "page": page, "tpf": point.tpf, "aup": point.aup, "note": point.aup_note,
                "reference": point is frontier.reference,
                "benchmarks": {b: {"tpf": s.tpf, "aup": s.aup, "note": s.note} for b, s in point.benchmarks.items()}}
    return speeds


def row_speed(row: Row, speeds: Speeds) -> dict[str, Any] | None:
    """The row's frontier speed: only when one frontier point's run backs every cell of the row."""
    runs = {cell.run.key for cell in row.cells.values()}
    return speeds.get(runs.pop()) if len(runs) == 1 else None


def _speed_columns(speed: dict[str, Any] | None, benchmark: str | None = None) -> dict[str, Any]:
    if speed is None:
        return {"tpf": None, "aup": None, "aup_undefined": None, "frontier_group": None}
    figures = speed["benchmarks"].get(benchmark, {}) if benchmark else speed
    return {"tpf": figures.get("tpf"), "aup": figures.get("aup"), "aup_undefined": figures.get("note"),
            "frontier_group": speed["group"]}


def cell_json(cell: Cell, shard: str | None) -> dict[str, Any]:
    """What the page needs of one cell (drill-down details live in the run's own data file)."""
    info = cell.run.record.benchmarks[cell.benchmark]
    return {
        "v": cell.value, "lo": cell.ci[0], "hi": cell.ci[1], "n": cell.n, "b": cell.benchmark,
        "ver": cell.column.dataset_version, "ver_inferred": cell.version_inferred,
        "run": cell.run.key, "status": cell.run.record.status,
        "dh": cell.run.record.decoding.config_hash(), "data": info.data_sha256[:12],
        "prompt": info.prompt_template_hash,
        "bs": cell.run.record.decoding.batch_size,
        "verifier": f"{info.verifier} v{info.verifier_version}", "created": cell.run.record.created_at,
        "commit": str(cell.run.record.environment.git_commit or "?")[:12]
        + (" (dirty)" if cell.run.record.environment.git_dirty else ""),
        "flags": cell.flags, "samples": shard is not None, "others": cell.other_runs,
        "more": {metric: list(values) for metric, values in cell.more.items()},
    }


def row_json(row: Row, spark: str | None, shards: dict[tuple[str, str], str], has_pairs: bool,
             speeds: Speeds | None = None) -> dict[str, Any]:
    return {**row.summary(), "spark": spark, "mean": row.mean, "pairs": has_pairs,
            "speed": row_speed(row, speeds or {}),
            "cells": {key: cell_json(c, shards.get((c.run.key, c.benchmark))) for key, c in row.cells.items()}}


def export_records(tables: list[SuiteTable], speeds: Speeds | None = None) -> list[dict[str, Any]]:
    """One dict per (row, table column) and per row mean, with the columns of :data:`EXPORT_COLUMNS`."""
    records, speeds = [], speeds or {}
    for table in tables:
        for row in table.rows:
            summary = row.summary()
            common = {"suite": table.name, "row": row.id, "model": summary["model"], "family": summary["family"],
                      "algorithm": summary["algorithm"], "training_run": summary["training_run"],
                      "training_step": summary["training_step"], "backend": summary["backend"],
                      "decoding_hash": summary["decoding_hash"]}
            for column in table.columns:
                cell = row.cells.get(column.id)
                if cell is None:
                    continue
                info = cell.run.record.benchmarks[cell.benchmark]
                shown = [(cell.metric, (cell.value, *cell.ci, cell.n)), *cell.more.items()]
                for metric, (value, low, high, n) in shown:
                    records.append({**common, "benchmark": cell.benchmark, "dataset_version": column.dataset_version,
                                    "dataset_version_inferred": cell.version_inferred, "metric": metric, "value": value,
                                    "ci_low": low, "ci_high": high, "n": n,
                                    "run_id": cell.run.record.run_id, "run_status": cell.run.record.status,
                                    "data_sha256": info.data_sha256,
                                    "verifier": f"{info.verifier} v{info.verifier_version}",
                                    "comparable": not any(f["severity"] == "major" for f in cell.flags),
                                    "flags": "; ".join(f["text"] for f in cell.flags),
                                    **_speed_columns(speeds.get(cell.run.key), cell.benchmark)})
            mean = row.mean or {}
            ci = mean.get("ci") or [None, None]
            records.append({**common, "benchmark": "mean", "dataset_version": None, "dataset_version_inferred": None,
                            "metric": "macro mean", "value": mean.get("value"),
                            "ci_low": ci[0], "ci_high": ci[1], "n": mean.get("n"), "run_id": None,
                            "run_status": None, "data_sha256": None, "verifier": None,
                            "comparable": not mean.get("missing"),
                            "flags": ("missing: " + ", ".join(mean["missing"])) if mean.get("missing") else "",
                            **_speed_columns(row_speed(row, speeds))})
    return records


def write_exports(site: Path, tables: list[SuiteTable], speeds: Speeds | None = None) -> dict[str, str]:
    """Write ``leaderboard.csv`` and ``leaderboard.json``; return their site-relative names."""
    records = export_records(tables, speeds)
    with (site / "leaderboard.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=EXPORT_COLUMNS)
        writer.writeheader()
        writer.writerows(records)
    document = {"suites": [{"name": t.name, "columns": [c.to_json() for c in t.columns], "metrics": t.metrics,
                            "extra": t.extra} for t in tables],
                "rows": records}
    (site / "leaderboard.json").write_text(json.dumps(document, indent=1, allow_nan=False), encoding="utf-8")
    return {"csv": "leaderboard.csv", "json": "leaderboard.json"}
