"""Per-sample data of a run: JS shards for the viewer and per-item values for paired statistics.

One pass over ``samples.jsonl`` per run does both: each valid line is copied verbatim (it already is a
JSON object, hence a JS expression) into ``data/samples/<run key>/<benchmark>.js``, so the viewer loads
one cell's samples on demand with a ``<script>`` tag (works from ``file://``); and the cell's metric field
(``passed`` or ``score``) is averaged per sample id over the k generations. Samples with status
``error`` (infrastructure) or ``unscored`` carry no verdict and are left out of the paired statistics.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .loading import LoadedRun, iter_sample_lines, slug

log = logging.getLogger(__name__)


@dataclass
class CellSamples:
    """What the site knows about one (run, benchmark) from its samples.

    ``values``: sample id -> mean of the metric field over the k generations (1.0/0.0 for verdicts).
    ``binary``: every value is exactly 0 or 1 (McNemar applies). ``shard``: site-relative JS path.
    ``nfe``: the lines' forward passes summed over the ``nfe_lines`` lines that record them.
    """

    values: dict[str, float] = field(default_factory=dict)
    binary: bool = True
    shard: str | None = None
    lines: int = 0
    verdicts: Counter = field(default_factory=Counter)
    nfe: int = 0
    nfe_lines: int = 0


def shard_path(run: LoadedRun, benchmark: str) -> str:
    # The hash keeps two names with the same slug ("GSM8K", "gsm8k") in separate files.
    return f"data/samples/{run.key}/{slug(benchmark)}-{hashlib.sha256(benchmark.encode()).hexdigest()[:6]}.js"


def register_call(kind: str, key: str) -> str:
    """The opening of a data file: ``DARE.register("kind", "key", `` + payload + ``);``."""
    return f"DARE.register({json.dumps(kind)}, {json.dumps(key)}, "


def collect_run_samples(run: LoadedRun, fields: dict[str, str], site: Path) -> dict[str, CellSamples]:
    """Stream one run's samples.jsonl: write a shard per benchmark in ``fields`` and gather the values.

    ``fields`` maps benchmark -> per-sample field to average (``passed`` or ``score``). Returns
    benchmark -> :class:`CellSamples`; empty when the run has no samples file (a warning says so).
    """
    path = run.samples_file
    if not path.resolve().is_relative_to(run.directory.resolve()):
        log.warning("run %s names samples_path %s outside its directory; its samples are ignored",
                    run.directory, run.record.samples_path)
        return {}
    if not path.is_file():
        log.warning("run %s has no samples file %s; its cells get no sample viewer or paired statistics",
                    run.directory, path.name)
        return {}
    cells: dict[str, CellSamples] = {}
    handles: dict[str, IO[str]] = {}
    sums: dict[str, dict[str, list[float]]] = {}
    try:
        for raw, sample in iter_sample_lines(path):
            bench = str(sample["benchmark"])
            if bench not in fields:
                continue
            if bench not in handles:
                relative = shard_path(run, bench)
                target = site / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                handles[bench] = target.open("w", encoding="utf-8")
                handles[bench].write(register_call("samples", f"{run.key}/{bench}") + "[\n")
                cells[bench] = CellSamples(shard=relative)
                sums[bench] = {}
            cell = cells[bench]
            handles[bench].write(("," if cell.lines else "") + raw + "\n")
            cell.lines += 1
            nfe = sample.get("nfe")
            if isinstance(nfe, int) and not isinstance(nfe, bool):
                cell.nfe += nfe
                cell.nfe_lines += 1
            status = sample.get("status", "scored")
            verdict = "error" if status == "error" else "unscored" if status == "unscored" else (
                "pass" if sample.get("passed") else "fail")
            cell.verdicts[verdict] += 1
            if status != "scored":
                continue
            value = _as_float(sample.get(fields[bench]))
            if value is None:
                continue
            entry = sums[bench].setdefault(str(sample["id"]), [0.0, 0])
            entry[0] += value
            entry[1] += 1
    finally:
        for handle in handles.values():
            handle.write("]);\n")
            handle.close()
    for bench, cell in cells.items():
        cell.values = {sid: total / count for sid, (total, count) in sums[bench].items()}
        cell.binary = all(v in (0.0, 1.0) for v in cell.values.values())
    return cells


def _as_float(value: object) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    return None
