"""The leaderboard's table model: suites -> rows (model, decoding hash, training run) -> cells per column.

Pure data, built from validated run records only. A column is a benchmark on one dataset version
(:mod:`.columns`): runs on two releases of a dataset never share one. A row may be backed by several runs
(one per benchmark, or reruns); for each column the cell shows the best run: complete before partial
before failed, newest first. The suite mean is the macro mean of the cells' primary metric, and only
when every column of the suite has a cell; otherwise the row is marked partial instead of averaging
what happens to be there (a row on another dataset version than the others is partial too: its mean would
not be comparable). A column shows its primary metric; the other ``pass@k`` of a k > 1 run
(pass@2, ...) get columns of their own beside it (``SuiteTable.extra``), for display and export only.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from dare.harness.records import TrainingLink, canonical_json

from .columns import Column, VersionIndex, column_order
from .comparability import column_flags
from .loading import LoadedRun, slug

# Which metric a column shows, in order of preference; anything else falls back to the first by name.
PRIMARY_METRICS = ("accuracy", "pass@1", "partial_credit")
# Which per-sample field a metric averages (paired statistics are computed over this field).
SAMPLE_FIELD_OF_METRIC = {"accuracy": "passed", "partial_credit": "score", "acc": "passed"}
STATUS_RANK = {"complete": 0, "partial": 1, "failed": 2}
Z95 = 1.959963984540054
# Every DARE metric is a mean of per-sample scores in [0, 1], so a mean's interval is clipped to it.
METRIC_RANGE = (0.0, 1.0)


def training_run(training: TrainingLink | None) -> str | None:
    """The training run a trained checkpoint came from: dare-train writes ``run`` (trainers/evaluate.py);
    ``run_id`` is read too, for records written by other tools."""
    return training.run_name() if training else None


def primary_metric(names: list[str]) -> str:
    for name in PRIMARY_METRICS:
        if name in names:
            return name
    pass_at = sorted(n for n in names if n.startswith("pass@"))
    return pass_at[0] if pass_at else min(names)


def sample_field(metric: str) -> str:
    return SAMPLE_FIELD_OF_METRIC.get(metric, "passed" if metric.startswith("pass@") else "score")


@dataclass
class Cell:
    run: LoadedRun
    benchmark: str
    column: Column
    metric: str
    value: float
    ci: tuple[float, float]
    n: int
    flags: list[dict[str, Any]] = field(default_factory=list)
    other_runs: int = 0  # runs of the same row and benchmark that this cell's run superseded
    more: dict[str, tuple[float, float, float, int]] = field(default_factory=dict)  # pass@k, k > 1: (v, lo, hi, n)
    version_inferred: bool = False  # the run recorded no dataset_version: its column was found by data sha256


@dataclass
class Row:
    id: str
    suite: str
    runs: list[LoadedRun]
    cells: dict[str, Cell] = field(default_factory=dict)  # column id -> cell
    mean: dict[str, Any] | None = None
    base_row: str | None = None

    @property
    def first(self) -> LoadedRun:
        return self.runs[0]

    @property
    def model(self) -> str:
        return self.first.record.model.name

    @property
    def training(self) -> TrainingLink | None:
        return self.first.record.model.training

    @property
    def group(self) -> str:
        """Rows of one model (name + weights) share a group, whatever their decoding config."""
        model = self.first.record.model
        return f"{model.name}@{model.fingerprint[:12]}"

    def summary(self) -> dict[str, Any]:
        record = self.first.record
        training = self.training or TrainingLink()
        decoding = record.decoding
        return {
            "id": self.id,
            "model": record.model.name,
            "group": self.group,
            "family": record.model.architecture or record.model.name.split("-")[0],
            "fingerprint": record.model.fingerprint,
            "algorithm": training.algorithm or "base",
            "training_run": training_run(training),
            "training_step": training.step,
            "base_model": training.base_model,
            "base_row": self.base_row,
            "backend": f"{record.backend.name} {record.backend.version}",
            "backend_name": record.backend.name,
            "decoding_hash": decoding.config_hash(),
            "decoding": (f"steps {decoding.steps} · len {decoding.gen_length} · block {decoding.block_length} · "
                         f"{decoding.remasking} · T {decoding.temperature:g}"
                         + (f" · k {decoding.num_samples}" if decoding.num_samples > 1 else "")),
            "git_commit": record.environment.git_commit,
            "git_dirty": bool(record.environment.git_dirty),
        }


@dataclass
class SuiteTable:
    name: str
    columns: list[Column]  # a benchmark on one dataset version each, in display order
    metrics: dict[str, str]  # column id -> the metric it shows
    rows: list[Row]
    extra: dict[str, list[str]] = field(default_factory=dict)  # column id -> pass@k (k > 1) columns beside it
    baseline: str | None = None  # the baseline row's id, which is also every column's comparability reference


def row_id(run: LoadedRun) -> str:
    record = run.record
    training = record.model.training
    identity = [record.suite, record.model.name, record.model.fingerprint, record.decoding.config_hash(),
                training_run(training), training.step if training else None]
    if record.engine_identity:  # bf16 and fp32 runs of one model are two rows (older records keep their ids)
        identity.append(record.engine_identity)
    return f"{slug(record.model.name, 24)}-{hashlib.sha256(canonical_json(identity).encode()).hexdigest()[:10]}"


def build_tables(runs: list[LoadedRun], baseline: str | None = None) -> list[SuiteTable]:
    """Group runs by suite and row, pick one run per cell, compute means, flags and base-model links.

    ``baseline``: a row id or model name (:func:`pick_baseline`); its row is each suite's baseline.
    """
    by_suite: dict[str, dict[str, Row]] = defaultdict(dict)
    for run in runs:
        rows = by_suite[run.record.suite]
        rid = row_id(run)
        rows.setdefault(rid, Row(rid, run.record.suite, [])).runs.append(run)
    versions = VersionIndex(runs)
    return [_suite_table(name, list(rows.values()), versions, baseline) for name, rows in sorted(by_suite.items())]


def pick_baseline(rows: list[Row], wanted: str | None) -> Row | None:
    """The row with id ``wanted``, else the model ``wanted``'s untrained row with the best suite mean
    (the first of its rows in the table's default order); trained rows of that name only without one."""
    if not wanted:
        return None
    matches = [r for r in rows if r.id == wanted] or \
        sorted((r for r in rows if r.model == wanted), key=lambda r: (r.training is not None, _default_order(r)))
    return matches[0] if matches else None


def _pass_at_k(name: str) -> int:
    return int(name[5:]) if name.startswith("pass@") and name[5:].isdigit() else 0


def _suite_table(name: str, rows: list[Row], versions: VersionIndex, wanted: str | None = None) -> SuiteTable:
    placed = {run.key: versions.columns_of(run) for row in rows for run in row.runs}
    columns = sorted({p.column for by_name in placed.values() for p in by_name.values()}, key=column_order)

    def on(run: LoadedRun, column: Column) -> bool:
        found = placed[run.key].get(column.benchmark)
        return found is not None and found.column == column

    metric_names = {c.id: sorted({m for row in rows for run in row.runs if on(run, c)
                                  for m in run.record.metrics[c.benchmark]}) for c in columns}
    metrics = {b: primary_metric(names) for b, names in metric_names.items()}
    extra = {b: sorted((m for m in names if _pass_at_k(m) > 1 and m != metrics[b]), key=_pass_at_k)
             for b, names in metric_names.items()}
    extra = {b: names for b, names in extra.items() if names}
    for row in rows:
        # Newest first, then (stable) complete before partial before failed.
        row.runs.sort(key=lambda r: (r.record.created_at, r.key), reverse=True)
        row.runs.sort(key=lambda r: STATUS_RANK.get(r.record.status, 3))
        for column in columns:
            bench, key = column.benchmark, column.id
            candidates = [r for r in row.runs if on(r, column) and metrics[key] in r.record.metrics[bench]
                          and bench in r.record.benchmarks]
            if not candidates:
                continue
            best = candidates[0]
            value = best.record.metrics[bench][metrics[key]]
            more = {m: (v.value, *v.ci, v.n) for m in extra.get(key, [])
                    if (v := best.record.metrics[bench].get(m)) is not None}
            row.cells[key] = Cell(best, bench, column, metrics[key], value.value, tuple(value.ci), value.n,
                                  other_runs=len(candidates) - 1, more=more,
                                  version_inferred=placed[best.key][bench].inferred)
    for row in rows:
        row.mean = suite_mean(row, [c.id for c in columns])
    base = pick_baseline(rows, wanted)
    for key in (c.id for c in columns):
        column_rows = [row for row in rows if key in row.cells]
        infos = [(r.cells[key].run.record, r.cells[key].run.record.benchmarks[r.cells[key].benchmark])
                 for r in column_rows]
        reference = column_rows.index(base) if base in column_rows else None
        for row, flags in zip(column_rows, column_flags(infos, reference)):
            row.cells[key].flags = flags
    _link_base_models(rows)
    rows.sort(key=_default_order)
    return SuiteTable(name, columns, metrics, rows, extra, base.id if base else None)


def _default_order(row: Row) -> tuple:
    """Best suite mean first; rows without a mean (partial) after all others, then by model name."""
    mean = (row.mean or {}).get("value")
    return (mean is None, -(mean or 0.0), row.model, row.id)


def suite_mean(row: Row, benchmarks: list[str]) -> dict[str, Any]:
    """Macro mean over the columns (ids in ``benchmarks``) with a normal-approximation CI from their intervals.

    Each benchmark's standard error is read back from its 95% interval (width / 2z) and the benchmarks
    are treated as independent; the interval is clipped to :data:`METRIC_RANGE` (a mean of 99.6% with a
    0.5-point half-width reads [99.1, 100], not [99.1, 100.1]). Missing benchmarks make the mean ``None``
    and list what is missing.
    """
    missing = [b for b in benchmarks if b not in row.cells]
    n = sum(c.n for c in row.cells.values())
    if missing:
        return {"value": None, "ci": None, "n": n, "missing": missing}
    cells = [row.cells[b] for b in benchmarks]
    value = sum(c.value for c in cells) / len(cells)
    se = math.sqrt(sum(((c.ci[1] - c.ci[0]) / (2 * Z95)) ** 2 for c in cells)) / len(cells)
    low, high = METRIC_RANGE
    return {"value": value, "ci": [max(low, value - Z95 * se), min(high, value + Z95 * se)], "n": n, "missing": []}


def _link_base_models(rows: list[Row]) -> None:
    """Point each trained row at its base model's row: same model name, preferring the same decoding."""
    untrained: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if not row.training:
            untrained[row.model].append(row)
    for row in rows:
        base = row.training.base_model if row.training else None
        if not base or base not in untrained:
            continue
        decoding = row.first.record.decoding.config_hash()
        same = [r for r in untrained[base] if r.first.record.decoding.config_hash() == decoding]
        row.base_row = (same or untrained[base])[0].id
