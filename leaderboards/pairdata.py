"""Paired statistics against one baseline, from per-column data whose size is linear in the rows.

:func:`~.statistics.paired_tables` pairs every two rows (R x R bootstraps), which no build of a large
suite can afford. Instead the build writes, per benchmark column of R rows over the union of N sample
ids, with the same seeded multinomial counts ``W[B, N]`` as statistics.py (:func:`column_data`):

* ``values[R][N]``: each row's value per item, None where the row lacks it (delta, shared n, McNemar);
* ``totals[R][B]``: ``S0 @ W.T``, each row's resampled sum (0 where it lacks an item);
* ``missing[K]``, ``weights[K][B]``: the union positions some row lacks, and their columns of ``W``.

The page (assets/pairs.js) computes a chosen baseline b's pairs from that, with statistics.py's algebra
(``r = 1 - miss_a - miss_b + both``): for every row a, ``own = totals_a - sum over miss_b of W S_a``,
``theirs = totals_b - sum over miss_a of W S_b``, ``shared = N - W(miss_a) - W(miss_b) + W(both missing)``
and the resampled delta is ``(own - theirs) / shared``, NaN where no shared item was drawn. Cost per
baseline: O(R (N + B) + R K B). :func:`baseline_pairs` is the same computation in numpy (float64, like the
page): the build uses it for its own ``--baseline``, and the tests hold both to ``paired_tables``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from . import site
from .loading import slug
from .statistics import MEAN_KEY, _percentile_interval, mcnemar_exact, rounded, union_arrays

Columns = dict[str, dict[str, tuple[dict[str, float], bool]]]  # benchmark -> row id -> (values, binary)


def column_data(per_row: dict[str, tuple[dict[str, float], bool]], n_boot: int, seed: str) -> dict:
    """The page's data for one column (module docstring); ``seed`` is the column id, as in paired_tables."""
    rows, values, mask, binary, weights = union_arrays(per_row, n_boot, seed)
    totals = values @ weights.T  # [R, B]; integers (exact in float64) when every value is
    missing = np.flatnonzero(~mask.all(axis=0))
    integral = bool(np.all(values == np.rint(values)))
    cast = (lambda a: a.astype(np.int64)) if integral else (lambda a: a)
    shown = cast(values).tolist()
    for r, row in enumerate(shown):
        for i in np.flatnonzero(~mask[r]).tolist():
            row[i] = None
    return {"n": int(values.shape[1]), "rows": rows, "binary": binary.tolist(), "values": shown,
            "totals": cast(totals).tolist(), "missing": missing.tolist(),
            "weights": weights[:, missing].T.astype(np.int64).tolist()}


def column_pairs(data: dict, baseline: str) -> dict[str, np.ndarray]:
    """Row id -> unrounded ``[delta, lo, hi, p, n]`` against ``baseline`` for the rows that share an
    item with it; empty when the baseline has no value in this column."""
    if baseline not in data["rows"]:
        return {}
    b = data["rows"].index(baseline)
    values = np.array(data["values"], dtype=float)  # None -> NaN
    mask = ~np.isnan(values)
    s0 = np.where(mask, values, 0.0)
    binary = np.array(data["binary"], dtype=bool)
    shared_n = mask.astype(float) @ mask[b]
    cross_a, cross_b, both = s0 @ mask[b], mask.astype(float) @ s0[b], s0 @ s0[b]
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = (cross_a - cross_b) / shared_n
    p = mcnemar_exact(np.rint(cross_a - both).astype(np.int64), np.rint(cross_b - both).astype(np.int64))
    p[~(binary & binary[b])] = np.nan
    totals = np.array(data["totals"], dtype=float)  # [R, B]
    ids = np.array(data["missing"], dtype=np.int64)
    weights = np.array(data["weights"], dtype=float).reshape(len(ids), totals.shape[1])  # [K, B]
    miss = (~mask[:, ids]).astype(float)  # [R, K]
    own = totals - (s0[:, ids] * miss[b]) @ weights
    theirs = totals[b] - (miss * s0[b, ids]) @ weights
    shared = data["n"] - miss @ weights - miss[b] @ weights + (miss * miss[b]) @ weights
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = np.where(shared > 0, (own - theirs) / shared, np.nan)
    lo, hi = _percentile_interval(boot)
    return {row: np.array([delta[a], lo[a], hi[a], p[a], shared_n[a]])
            for a, row in enumerate(data["rows"]) if a != b and shared_n[a] > 0}


def baseline_pairs(columns: dict[str, dict], baseline: str) -> dict[str, dict[str, list]]:
    """``{other row: {column id or "_mean": [delta, lo, hi, p or None, n]}}`` against ``baseline``, as
    :func:`~.statistics.pairs_for_baseline` gives them; ``columns``: column id -> :func:`column_data`.

    The suite mean needs the pair in every column: mean delta, interval half-width the root sum of the
    per-column half-widths over the number of columns (as ``_mean_tables``).
    """
    per_column = {bench: column_pairs(data, baseline) for bench, data in sorted(columns.items())}
    result: dict[str, dict[str, list]] = {}
    for bench, pairs in per_column.items():
        for row, stats in pairs.items():
            result.setdefault(row, {})[bench] = rounded(stats[None])[0]
    for row in result:
        stacked = [pairs[row] for pairs in per_column.values() if row in pairs]
        if len(stacked) < len(per_column):
            continue
        stats = np.stack(stacked)  # [columns, 5]
        delta = stats[:, 0].mean()
        half = np.sqrt((((stats[:, 2] - stats[:, 1]) / 2) ** 2).sum()) / len(stats)
        mean = np.array([delta, delta - half, delta + half, np.nan, stats[:, 4].sum()])
        result[row][MEAN_KEY] = rounded(mean[None])[0]
    return result


def write_pairs(stage: Path, suite: str, columns: Columns, baseline: str | None, n_boot: int
                ) -> tuple[set[str], dict]:
    """Write a suite's per-column data (``data/pairs/<suite>/<column>.js``) and, for the build's own
    ``baseline`` when it has samples, its pairs (``data/pairs/<row>.js``, so the default view needs no
    column data). Returns the ids of the rows with samples and the suite's ``pairs`` entry of the index:
    ``{"columns": {column id: data file}, "precomputed": [row ids with a pairs file]}``."""
    folder = f"data/pairs/{_name(suite)}"
    data = {column: column_data(per_row, n_boot, column) for column, per_row in sorted(columns.items())}
    files = {column: f"{folder}/{_name(column)}.js" for column in data}
    for column, payload in data.items():
        site.write_data(stage, files[column], "columns", files[column], payload)
    rows = {row for payload in data.values() for row in payload["rows"]}
    precomputed = [baseline] if baseline in rows else []
    for row in precomputed:
        site.write_data(stage, f"data/pairs/{row}.js", "pairs", row, baseline_pairs(data, row))
    return rows, {"columns": files, "precomputed": precomputed}


def _name(text: str) -> str:
    # The hash keeps two names with the same slug ("GSM8K", "gsm8k") in separate files.
    return f"{slug(text)}-{hashlib.sha256(text.encode()).hexdigest()[:6]}"
