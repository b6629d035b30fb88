"""The table as plain data: the JSON the page embeds, and CSV/JSON exports written beside the HTML.

The export is long-format (one line per row, column and shown metric, plus a ``mean`` line per row), because
suites have different columns; ``pandas.read_csv(...).pivot(...)`` gives the wide table back. A column is a
benchmark on one dataset version: ``benchmark`` and ``dataset_version`` (empty: unknown) together name it.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from .table import Cell, Row, SuiteTable

EXPORT_COLUMNS = (
    "suite", "row", "model", "family", "algorithm", "training_run", "training_step", "backend", "decoding_hash",
    "benchmark", "dataset_version", "dataset_version_inferred", "metric", "value", "ci_low", "ci_high", "n",
    "run_id", "run_status", "data_sha256", "verifier", "comparable", "flags",
)


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


def row_json(row: Row, spark: str | None, shards: dict[tuple[str, str], str], has_pairs: bool) -> dict[str, Any]:
    return {**row.summary(), "spark": spark, "mean": row.mean, "pairs": has_pairs,
            "cells": {key: cell_json(c, shards.get((c.run.key, c.benchmark))) for key, c in row.cells.items()}}


def export_records(tables: list[SuiteTable]) -> list[dict[str, Any]]:
    """One dict per (row, table column) and per row mean, with the columns of :data:`EXPORT_COLUMNS`."""
    records = []
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
                                    "flags": "; ".join(f["text"] for f in cell.flags)})
            mean = row.mean or {}
            ci = mean.get("ci") or [None, None]
            records.append({**common, "benchmark": "mean", "dataset_version": None, "dataset_version_inferred": None,
                            "metric": "macro mean", "value": mean.get("value"),
                            "ci_low": ci[0], "ci_high": ci[1], "n": mean.get("n"), "run_id": None,
                            "run_status": None, "data_sha256": None, "verifier": None,
                            "comparable": not mean.get("missing"),
                            "flags": ("missing: " + ", ".join(mean["missing"])) if mean.get("missing") else ""})
    return records


def write_exports(site: Path, tables: list[SuiteTable]) -> dict[str, str]:
    """Write ``leaderboard.csv`` and ``leaderboard.json``; return their site-relative names."""
    records = export_records(tables)
    with (site / "leaderboard.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=EXPORT_COLUMNS)
        writer.writeheader()
        writer.writerows(records)
    document = {"suites": [{"name": t.name, "columns": [c.to_json() for c in t.columns], "metrics": t.metrics,
                            "extra": t.extra} for t in tables],
                "rows": records}
    (site / "leaderboard.json").write_text(json.dumps(document, indent=1, allow_nan=False), encoding="utf-8")
    return {"csv": "leaderboard.csv", "json": "leaderboard.json"}
