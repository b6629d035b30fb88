"""Comparability guards: flag a cell whose identity differs from the rest of its column.

For every column (suite, benchmark) the reference is the most common value among its cells of each
identity field (decoding ``config_hash``, the engine settings that can change tokens, data sha256, prompt
template hash, verifier name + version + options: the keys of the harness's generation and verdict caches).
A cell that differs gets a flag that spells out the difference (for decoding: the differing fields).
Execution-only differences (``batch_size``) get a minor flag: decoding is batch-invariant by contract,
but a mismatch is still worth seeing. Partial and failed runs are flagged too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from dare.harness.records import BenchmarkInfo, DecodingConfig, RunRecord, canonical_json

# Each guard: (kind, what it is called, how to read it from a run for one benchmark).
_IdentityReader = Callable[[RunRecord, BenchmarkInfo], str]
IDENTITY_GUARDS: tuple[tuple[str, str, _IdentityReader], ...] = (
    ("decoding", "decoding config", lambda run, info: run.decoding.config_hash()),
    ("engine", "engine settings", lambda run, info: canonical_json(run.engine_identity)),
    ("data", "data sha256", lambda run, info: info.data_sha256),
    ("prompt", "prompt template hash", lambda run, info: info.prompt_template_hash),
    ("verifier", "verifier", lambda run, info: f"{info.verifier} v{info.verifier_version} {canonical_json(info.verifier_options)}"),
)


def most_common(values: Sequence[str]) -> str:
    """The majority value; ties go to the smallest value so the reference does not depend on input order."""
    counts = Counter(values)
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)


def decoding_difference(cell: DecodingConfig, reference: DecodingConfig) -> str:
    """``steps 128 (column: 256), block_length 64 (column: 32)``: the semantic fields that differ."""
    mine = cell.model_dump(exclude={"batch_size"})
    theirs = reference.model_dump(exclude={"batch_size"})
    parts = [f"{name} {_short(mine[name])} (column: {_short(theirs[name])})" for name in mine if mine[name] != theirs[name]]
    return ", ".join(parts) or "same fields, different hash"


def column_flags(cells: Sequence[tuple[RunRecord, BenchmarkInfo]]) -> list[list[dict[str, Any]]]:
    """Flags for each cell of one column, in input order. A flag is ``{"kind", "text", "severity"}``."""
    flags: list[list[dict[str, Any]]] = [[] for _ in cells]
    if not cells:
        return flags
    for kind, label, read in IDENTITY_GUARDS:
        values = [read(run, info) for run, info in cells]
        reference = most_common(values)
        if all(v == reference for v in values):
            continue
        reference_run = next(run for (run, _), v in zip(cells, values) if v == reference)
        for index, ((run, _info), value) in enumerate(zip(cells, values)):
            if value == reference:
                continue
            if kind == "decoding":
                detail = decoding_difference(run.decoding, reference_run.decoding)
                text = f"decoding differs from the column's most common config {reference}: {detail}"
            else:
                text = f"{label} {_short(value)} differs from the column's most common {_short(reference)}"
            flags[index].append({"kind": kind, "text": text, "severity": "major"})
    batch_sizes = [str(run.decoding.batch_size) for run, _ in cells]
    usual_batch = most_common(batch_sizes)
    for index, ((run, info), batch) in enumerate(zip(cells, batch_sizes)):
        if batch != usual_batch:
            flags[index].append({
                "kind": "batch",
                "text": f"batch_size {batch} (column: {usual_batch}); execution only, not part of the config hash",
                "severity": "minor",
            })
        if run.status != "complete":
            flags[index].append({"kind": run.status, "text": f"{run.status} run: {info.n_used} of {info.n_total} samples used",
                                 "severity": "major"})
        elif info.n_used < info.n_total:
            flags[index].append({"kind": "subset", "text": f"subset: {info.n_used} of {info.n_total} samples",
                                 "severity": "minor"})
    return flags


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] + "…" if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text
