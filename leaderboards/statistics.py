"""Paired statistics between every two leaderboard rows, on the samples they share.

One benchmark column holds R rows as vectors over the union of N sample ids: ``S0[R, N]`` (value, 0
where absent) and ``M[R, N]`` (present). Rows a and b pair up on ``r = M_a & M_b``:

* point estimate ``delta = mean(S_a - S_b over r)`` and, for 0/1 verdicts, the exact McNemar test on
  the discordant counts; all pairs at once through ``R x R`` matrix products;
* paired bootstrap: one multinomial count matrix ``W[B, N]`` resamples the union, and the resampled
  delta is ``sum_i w_i r_i (S_a,i - S_b,i) / sum_i w_i r_i`` (the shared items of a union resample are a
  resample of the shared set of slightly random size). Expanding ``r = 1 - miss_a - miss_b + both``
  makes that linear in the precomputed totals ``S0 @ W.T`` plus sums over the (usually few) missing ids
  of a row, so all R^2/2 pairs cost O(B) each plus small products, instead of O(B N) each.

The suite mean's delta averages the per-benchmark deltas; its interval combines the per-benchmark
bootstrap intervals as independent normal errors (as the table's own mean column does). Pairs never
form across different data files: the caller namespaces sample ids by data hash.

This module is the spec. The build pairs no two rows itself: it writes per-column data linear in the rows,
from which the page computes a chosen baseline's pairs with this algebra (pairdata.py, assets/pairs.js).
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

N_BOOT = 1000
MEAN_KEY = "_mean"
STATS = ("delta", "lo", "hi", "p", "n")


def _seeded(text: str) -> np.random.Generator:
    return np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:8], 16))


@dataclass
class Column:
    """One benchmark: ``rows`` (global row indices), ``values``/``mask`` ``[R, N]``, ``binary[R]``,
    bootstrap counts ``weights[B, N]``, ``totals = S0 @ W.T`` and ``missing_weight = (1 - M) @ W.T`` ``[R, B]``."""

    rows: np.ndarray
    values: np.ndarray
    mask: np.ndarray
    binary: np.ndarray
    weights: np.ndarray
    totals: np.ndarray = field(init=False)
    missing_weight: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        # float32 halves the memory traffic of the O(B R^2) work; counts and sums of 0/1 values are exact.
        self.exact_values = self.values
        self.values = self.values.astype(np.float32)
        self.weights = self.weights.astype(np.float32)
        self.totals = self.values @ self.weights.T  # [R, B]
        self.missing_weight = (~self.mask).astype(np.float32) @ self.weights.T  # [R, B]
        self.missing_ids = [np.flatnonzero(~row) for row in self.mask]


def union_arrays(per_row: dict, n_boot: int, seed: str
                 ) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One benchmark's rows over the sorted union of N sample ids: ``(rows, values[R, N], mask[R, N],
    binary[R], weights[B, N])``; ``per_row``: row -> (sample id -> value, all-binary), rows sorted.

    ``weights`` is the seeded multinomial resampling of the union (it depends on N and ``seed`` only).
    """
    rows = sorted(per_row)
    ids = sorted({sid for r in rows for sid in per_row[r][0]})
    position = {sid: i for i, sid in enumerate(ids)}
    values = np.zeros((len(rows), len(ids)))
    mask = np.zeros((len(rows), len(ids)), dtype=bool)
    for i, r in enumerate(rows):
        cols = np.fromiter((position[s] for s in per_row[r][0]), dtype=np.int64, count=len(per_row[r][0]))
        values[i, cols] = np.fromiter(per_row[r][0].values(), dtype=float, count=len(cols))
        mask[i, cols] = True
    n = len(ids)
    weights = _seeded(seed).multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
    return rows, values, mask, np.array([per_row[r][1] for r in rows], dtype=bool), weights


def _column(per_row: dict[int, tuple[dict[str, float], bool]], n_boot: int, seed: str) -> Column:
    rows, values, mask, binary, weights = union_arrays(per_row, n_boot, seed)
    return Column(np.array(rows), values, mask, binary, weights)


def bootstrap_deltas(col: Column, block_floats: float = 2e7) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(b, deltas[R - b - 1, B])``: resampled (row a minus row b) for every later row a.

    Everything is laid out rows x resamples so each row's B values are contiguous. The corrections
    over b's missing ids are one product per b; those over a's missing ids are computed for a block of
    baselines at once (row a meets every b of the block), so each is a BLAS call, never a per-pair gather.
    """
    size, n_boot = len(col.rows), col.weights.shape[0]
    block = max(1, int(block_floats // max(1, 2 * size * n_boot)))
    missing = (~col.mask).astype(np.float32)
    total_weight = col.weights.sum(axis=1)
    for b0 in range(0, size - 1, block):
        b1 = min(b0 + block, size - 1)
        width = b1 - b0
        # corrections[a, j] = sum over the ids a misses of W * value of row b0 + j;
        # corrections[a, width + j] = the same sum of W where row b0 + j misses the id too.
        against = np.concatenate([col.values[b0:b1], missing[b0:b1]])
        corrections = np.zeros((size, 2 * width, n_boot), dtype=np.float32)
        for a in range(b0 + 1, size):
            ids = col.missing_ids[a]
            if len(ids):
                corrections[a] = against[:, ids] @ col.weights[:, ids].T
        for j, b in enumerate(range(b0, b1)):
            ids = col.missing_ids[b]
            own = col.totals[b + 1:] - col.values[b + 1:, ids] @ col.weights[:, ids].T
            theirs = col.totals[b] - corrections[b + 1:, j]
            shared = total_weight - col.missing_weight[b + 1:] - col.missing_weight[b] + corrections[b + 1:, width + j]
            with np.errstate(invalid="ignore", divide="ignore"):
                yield b, (own - theirs) / shared


def _percentile_interval(boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2.5% and 97.5% quantiles per row; NaN resamples (no shared item drawn) are ignored."""
    if not np.isnan(boot).any():
        return tuple(np.quantile(boot, [0.025, 0.975], axis=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN row (nothing shared) stays NaN
        return tuple(np.nanquantile(boot, [0.025, 0.975], axis=1))


def point_estimates(col: Column) -> dict[str, np.ndarray]:
    """``R x R`` matrices (row minus column): delta, McNemar p (NaN unless both binary), shared n."""
    present = col.mask.astype(float)
    values = col.exact_values
    cross = values @ present.T  # [a, b] = sum of S_a over ids b also has
    both = values @ values.T
    shared = present @ present.T
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = (cross - cross.T) / shared
    gained = np.rint(cross - both).astype(np.int64)  # a right, b wrong
    lost = gained.T
    p = mcnemar_exact(gained, lost)
    p[~np.outer(col.binary, col.binary)] = np.nan
    return {"delta": delta, "p": p, "n": shared}


def mcnemar_exact(gained: np.ndarray, lost: np.ndarray) -> np.ndarray:
    """Exact two-sided McNemar p-values (binomial test at 1/2 on the discordant counts), elementwise."""
    gained, lost = np.asarray(gained), np.asarray(lost)
    n = gained + lost
    top = int(n.max(initial=0))
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, top + 1)))])
    k = np.arange(top + 1)
    log_pmf = log_fact[:, None] - log_fact[None, :] - log_fact[np.maximum(k[:, None] - k[None, :], 0)]
    pmf = np.where(k[None, :] <= k[:, None], np.exp(log_pmf - k[:, None] * np.log(2.0)), 0.0)
    cdf = np.cumsum(pmf, axis=1)  # cdf[n, j] = P(Binomial(n, 1/2) <= j)
    return np.minimum(1.0, 2.0 * cdf[n, np.minimum(gained, lost)])


def paired_tables(columns: dict[str, dict[str, tuple[dict[str, float], bool]]],
                  n_boot: int = N_BOOT) -> tuple[list[str], dict[str, dict[str, np.ndarray]]]:
    """All pairs of one suite. ``columns``: benchmark -> row id -> (sample id -> value, all-binary).

    Returns the row ids and, per benchmark and for :data:`MEAN_KEY`, ``R x R`` matrices named by
    :data:`STATS` where ``[a, b]`` is row a against baseline b (NaN where a and b share nothing).
    """
    rows = sorted({r for per_row in columns.values() for r, (values, _) in per_row.items() if values})
    index = {r: i for i, r in enumerate(rows)}
    size = len(rows)
    out: dict[str, dict[str, np.ndarray]] = {}
    covered = np.zeros((size, size), dtype=int)
    for bench, per_row in sorted(columns.items()):
        col = _column({index[r]: v for r, v in per_row.items() if v[0]}, n_boot, bench)
        stats = {name: np.full((size, size), np.nan) for name in STATS}
        where = np.ix_(col.rows, col.rows)
        for name, matrix in point_estimates(col).items():
            stats[name][where] = matrix
        for b, boot in bootstrap_deltas(col):
            lo, hi = _percentile_interval(boot)
            later, gb = col.rows[b + 1:], col.rows[b]
            stats["lo"][later, gb], stats["hi"][later, gb] = lo, hi
            stats["lo"][gb, later], stats["hi"][gb, later] = -hi, -lo
        covered[where] += 1
        out[bench] = stats
    out[MEAN_KEY] = _mean_tables(out, covered, len(columns))
    return rows, out


def _mean_tables(per_bench: dict[str, dict[str, np.ndarray]], covered: np.ndarray,
                 n_bench: int) -> dict[str, np.ndarray]:
    """Suite-mean deltas for pairs that share every benchmark, with a normal-approximation interval."""
    complete = covered == n_bench
    np.fill_diagonal(complete, False)
    stacked = {name: np.stack([t[name] for t in per_bench.values()]) for name in ("delta", "lo", "hi", "n")}
    delta = stacked["delta"].mean(axis=0)
    half_width = np.sqrt((((stacked["hi"] - stacked["lo"]) / 2) ** 2).sum(axis=0)) / n_bench  # z cancels
    nan = np.full(complete.shape, np.nan)
    return {"delta": np.where(complete, delta, nan), "lo": np.where(complete, delta - half_width, nan),
            "hi": np.where(complete, delta + half_width, nan), "p": nan,
            "n": np.where(complete, stacked["n"].sum(axis=0), nan)}


def pairs_for_baseline(rows: list[str], tables: dict[str, dict[str, np.ndarray]], baseline: str) -> dict:
    """``{other row: {benchmark or "_mean": [delta, lo, hi, p or None, n]}}`` against ``baseline``."""
    b = rows.index(baseline)
    result: dict[str, dict[str, list]] = {}
    for bench, stats in tables.items():
        column = np.stack([stats[name][:, b] for name in STATS], axis=1)  # [R, 5]
        present = ~np.isnan(column[:, 0])
        present[b] = False
        for a, values in zip(np.flatnonzero(present), rounded(column[present])):
            result.setdefault(rows[a], {})[bench] = values
    return result


def rounded(stats: np.ndarray) -> list[list]:
    """``[k, 5]`` rows of :data:`STATS` as shown: 6 decimals for delta, lo, hi; 6 significant digits
    for p; an int n; None for NaN."""
    stats = stats.copy()
    stats[:, :3] = np.round(stats[:, :3], 6) + 0.0  # + 0.0 turns -0.0 into 0.0
    out = []
    for values in stats.tolist():
        values[3] = float(f"{values[3]:.6g}")  # p-values keep significant digits, not decimals
        values[4] = int(values[4])
        out.append([None if math.isnan(v) else v for v in values])
    return out
