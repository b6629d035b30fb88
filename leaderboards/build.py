"""``build_site``: run directories in, static leaderboard out (the engine of ``dare-leaderboard build``).

load records -> table model -> one pass over each shown run's samples (shards + per-item values)
-> per-column pair data per suite (pairdata.py; the page pairs a chosen baseline from it) -> data files, page,
exports, frontier and training pages -> atomic swap into ``out``.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from dare.harness.errors import InputError

from . import curves, frontier_page, site, training_page
from .comparability import REFERENCE_RULE
from .exports import row_json, speeds_by_run, write_exports
from .frontier import build_frontiers, frontier_groups
from .loading import LoadedRun, SkippedRun, load_runs
from .pairdata import Columns, write_pairs
from .samples import CellSamples, collect_run_samples
from .statistics import N_BOOT
from .table import SuiteTable, build_tables, primary_metric, sample_field

log = logging.getLogger(__name__)


@dataclass
class BuildReport:
    out: Path
    runs: int
    skipped: list[SkippedRun]
    suites: dict[str, int] = field(default_factory=dict)  # suite -> number of rows
    index_bytes: int = 0
    seconds: float = 0.0
    frontiers: list[dict[str, str]] = field(default_factory=list)  # [{"title", "href"}] of the frontier pages


def build_site(run_roots: Sequence[Path], out: Path, *, baseline: str | None = None,
               title: str = "DARE leaderboard", n_boot: int = N_BOOT) -> BuildReport:
    """Build the site from every run record under ``run_roots`` into ``out``; see the module docstring."""
    started = time.perf_counter()
    loaded = load_runs(run_roots)
    if not loaded.runs:
        roots = ", ".join(str(r) for r in run_roots)
        raise InputError(f"no valid run record (run.json) under {roots}; point --runs at dare-eval output folders")
    tables = build_tables(loaded.runs, baseline)
    defaults = resolve_baseline(tables, baseline)
    stage = site.staging_dir(out)
    try:
        # A frontier point may be a run the table does not show (a rerun's older run): its drill-down needs samples too.
        points = [run for group in frontier_groups(loaded.runs).values() for run in group]
        samples = _collect_samples(tables, stage, points)
        frontiers = build_frontiers(loaded.runs, lambda run: _nfe_sums(run, samples))
        speeds = speeds_by_run(frontiers)  # TPF and AUP of frontier points, for the table and the exports
        pairs = {t.name: write_pairs(stage, t.name, _pair_columns(t, samples), t.baseline, n_boot) for t in tables}
        sparks = _write_runs(loaded.runs, samples, stage)
        shards = {key: cell.shard for key, cell in samples.items() if cell.shard}
        index = {
            "title": title,
            "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "baseline": defaults,
            "skipped": [{"path": str(s.path), "reason": s.reason} for s in loaded.skipped],
            "exports": write_exports(stage, tables, speeds),
            "suites": [{"name": t.name, "columns": [c.to_json() for c in t.columns], "metrics": t.metrics,
                        "extra": t.extra, "reference": t.baseline or REFERENCE_RULE, "pairs": pairs[t.name][1],
                        "rows": [row_json(r, sparks.get(r.first.key), shards, r.id in pairs[t.name][0],
                                          speeds) for r in t.rows]}
                       for t in tables],
        }
        index_bytes = site.write_data(stage, "data/index.js", "index", "main", index)
        pages = frontier_page.write_pages(stage, frontiers)
        training = training_page.write_page(stage, loaded.runs)
        index_bytes += site.write_page(stage, title, pages, training)
        site.publish(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    report = BuildReport(Path(out), len(loaded.runs), loaded.skipped, {t.name: len(t.rows) for t in tables},
                         index_bytes, time.perf_counter() - started, pages)
    log.info("built %s from %d runs (%d skipped) in %.1f s", out, report.runs, len(report.skipped), report.seconds)
    return report


def resolve_baseline(tables: list[SuiteTable], wanted: str | None) -> dict[str, str]:
    """Suite -> the baseline row that :func:`~.table.pick_baseline` chose for ``wanted`` (an error if none)."""
    if not wanted:
        return {}
    chosen = {table.name: table.baseline for table in tables if table.baseline}
    if not chosen:
        models = sorted({r.model for t in tables for r in t.rows})
        raise InputError(f"--baseline {wanted!r} matches no model or row; models: {', '.join(models)}")
    return chosen


def _collect_samples(tables: list[SuiteTable], stage: Path, more: Sequence[LoadedRun] = ()
                     ) -> dict[tuple[str, str], CellSamples]:
    """(run key, benchmark) -> samples of every cell shown and of every run in ``more``, reading each
    run's file once."""
    wanted: dict[str, tuple[LoadedRun, dict[str, str]]] = {}
    for table in tables:
        for row in table.rows:
            for cell in row.cells.values():
                wanted.setdefault(cell.run.key, (cell.run, {}))[1][cell.benchmark] = sample_field(cell.metric)
    for run in more:
        for bench, metrics in run.record.metrics.items():
            wanted.setdefault(run.key, (run, {}))[1].setdefault(bench, sample_field(primary_metric(sorted(metrics))))
    collected: dict[tuple[str, str], CellSamples] = {}
    for key, (run, fields) in sorted(wanted.items()):
        for bench, cell_samples in collect_run_samples(run, fields, stage).items():
            collected[(key, bench)] = cell_samples
    return collected


def _nfe_sums(run: LoadedRun, samples: dict[tuple[str, str], CellSamples]) -> dict[str, tuple[int, int]]:
    """Benchmark -> (NFE summed, lines) of a run's samples as the one pass counted them; a benchmark
    with a line that lacks NFE is left out."""
    cells = {bench: samples.get((run.key, bench)) for bench in run.record.metrics}
    return {bench: (c.nfe, c.lines) for bench, c in cells.items() if c and c.nfe_lines == c.lines}


def _pair_columns(table: SuiteTable, samples: dict[tuple[str, str], CellSamples]) -> Columns:
    """Column id -> row id -> (sample id -> value, all-binary) for the rows of ``table`` with samples."""
    columns: Columns = {}
    for row in table.rows:
        for column, cell in row.cells.items():
            found = samples.get((cell.run.key, cell.benchmark))
            if found and found.values:
                # Items only pair up when the data file is the same: the sample id is namespaced by its hash.
                data = cell.run.record.benchmarks[cell.benchmark].data_sha256[:16]
                values = {f"{data}:{sid}": v for sid, v in found.values.items()}
                columns.setdefault(column, {})[row.id] = (values, found.binary)
    return columns


def _write_runs(runs: list[LoadedRun], samples: dict[tuple[str, str], CellSamples], stage: Path) -> dict[str, str]:
    """A data file per run (record, curves, sample shards); returns run key -> sparkline SVG."""
    sparks: dict[str, str] = {}
    by_run: dict[str, dict[str, CellSamples]] = {}
    for (key, bench), found in samples.items():
        by_run.setdefault(key, {})[bench] = found
    for run in runs:
        curve = curves.load_curve(run.record.model.training, run.directory)
        spark = curves.sparkline(curve) if curve else None
        if spark:
            sparks[run.key] = spark
        cells = {bench: {"shard": found.shard, "lines": found.lines, "verdicts": dict(found.verdicts)}
                 for bench, found in by_run.get(run.key, {}).items()}
        detail = {"record": run.record.to_json(), "directory": str(run.directory), "cells": cells,
                  "curves": curves.curve_chart(curve, run.record.model.name) if curve else None}
        site.write_data(stage, f"data/runs/{run.key}.js", "run", run.key, detail)
    return sparks
