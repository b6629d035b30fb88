"""Comparability guards: flag a cell whose identity differs from its column's reference cell.

For every column (suite, benchmark) the reference is one cell, never a vote among them:

* the baseline row's cell, when the build names a baseline (``--baseline``) and that row has the column;
* otherwise the first cell in this order (:func:`reference_order`): untrained models before trained ones,
  complete runs before partial and failed ones, the earliest ``created_at``, then the smallest run id.
  A rerun or a new model added later thus never moves the reference of the cells already there.

A cell whose identity fields (decoding ``config_hash``, the engine settings that can change tokens, data
sha256, prompt template hash, verifier name + version + options: the keys of the harness's generation and
verdict caches) differ from the reference's gets a flag that spells out the difference (for decoding: the
differing fields). Execution-only differences (``batch_size``) get a minor flag: decoding is
batch-invariant by contract, but a mismatch is still worth seeing. Partial and failed runs are flagged too.
A likelihood-scored benchmark reads no decoding but its seed (the Monte-Carlo draws) and is guarded by its
estimator too (which also keys its column: leaderboards/columns.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dare.harness.records import BenchmarkInfo, DecodingConfig, RunRecord, canonical_json

# Each guard: (kind, what it is called, how to read it from a run for one benchmark).
_IdentityReader = Callable[[RunRecord, BenchmarkInfo], str]
IDENTITY_GUARDS: tuple[tuple[str, str, _IdentityReader], ...] = (
    ("decoding", "decoding config",
     lambda run, info: run.decoding.config_hash() if info.estimator is None else f"seed {run.decoding.seed}"),
    ("estimator", "likelihood estimator",
     lambda run, info: canonical_json(info.estimator.model_dump(mode="json")) if info.estimator else ""),
    ("engine", "engine settings", lambda run, info: canonical_json(run.engine_identity)),
    ("data", "data sha256", lambda run, info: info.data_sha256),
    ("prompt", "prompt template hash", lambda run, info: info.prompt_template_hash),
    ("verifier", "verifier",
     lambda run, info: f"{info.verifier} v{info.verifier_version} {canonical_json(info.verifier_options)}"),
)
STATUS_ORDER = {"complete": 0, "partial": 1, "failed": 2}
REFERENCE_RULE = "the oldest complete run of an untrained model"


def reference_order(run: RunRecord) -> tuple:
    """Sort key of the stated rule: untrained first, complete first, oldest first, then run id."""
    return (run.model.training is not None, STATUS_ORDER.get(run.status, 3), run.created_at, run.run_id)


def reference_index(cells: Sequence[tuple[RunRecord, BenchmarkInfo]], baseline: int | None = None) -> int:
    """Which cell of a column is its reference: ``baseline`` when given, else the rule's first."""
    if baseline is not None:
        return baseline
    return min(range(len(cells)), key=lambda i: reference_order(cells[i][0]))


def decoding_difference(cell: DecodingConfig, reference: DecodingConfig) -> str:
    """``steps 128 (column: 256), block_length 64 (column: 32)``: the semantic fields that differ."""
    mine = cell.model_dump(exclude={"batch_size"})
    theirs = reference.model_dump(exclude={"batch_size"})
    parts = [f"{name} {_short(mine[name])} (column: {_short(theirs[name])})" for name in mine
             if mine[name] != theirs[name]]
    return ", ".join(parts) or "same fields, different hash"


def column_flags(cells: Sequence[tuple[RunRecord, BenchmarkInfo]], baseline: int | None = None,
                 ) -> list[list[dict[str, Any]]]:
    """Flags for each cell of one column, in input order. A flag is ``{"kind", "text", "severity"}``.

    ``baseline``: the index of the baseline row's cell, which then is the column's reference.
    """
    flags: list[list[dict[str, Any]]] = [[] for _ in cells]
    if not cells:
        return flags
    ref = reference_index(cells, baseline)
    reference_run, reference_info = cells[ref]
    whose = "the baseline's" if baseline is not None else f"the column reference's ({reference_run.run_id})"
    for kind, label, read in IDENTITY_GUARDS:
        reference = read(reference_run, reference_info)
        for index, (run, info) in enumerate(cells):
            value = read(run, info)
            if value == reference:
                continue
            if kind == "decoding" and info.estimator is None:
                detail = decoding_difference(run.decoding, reference_run.decoding)
                text = f"decoding differs from {whose} config {reference}: {detail}"
            else:
                text = f"{label} {_short(value)} differs from {whose} {_short(reference)}"
            flags[index].append({"kind": kind, "text": text, "severity": "major"})
    usual_batch = str(reference_run.decoding.batch_size)
    for index, (run, info) in enumerate(cells):
        batch = str(run.decoding.batch_size)
        if batch != usual_batch:
            flags[index].append({
                "kind": "batch",
                "text": f"batch_size {batch} (column: {usual_batch}); execution only, not part of the config hash",
                "severity": "minor",
            })
        if run.status != "complete":
            flags[index].append({"kind": run.status,
                                 "text": f"{run.status} run: {info.n_used} of {info.n_total} samples used",
                                 "severity": "major"})
        elif info.n_used < info.n_total:
            flags[index].append({"kind": "subset", "text": f"subset: {info.n_used} of {info.n_total} samples",
                                 "severity": "minor"})
    return flags


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] + "…" if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text
