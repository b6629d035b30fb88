"""Paired statistics between leaderboard rows on the samples they share.

For one benchmark column, rows are vectors of per-sample values (``R x N`` over the union of sample
ids, with a mask of which ids each row has). The paired bootstrap resamples items with one count matrix
``W`` (``B x N``, multinomial), so the resampled mean difference of rows a and b on their shared ids r is

    (W @ (S_a * r) - W @ (S_b * r)) / (W @ r)

which is linear in the rows: one ``W @ (S * r).T`` product (``B x R``) serves every pair whose shared
set is r. Resampling the union and keeping the shared ids resamples the shared set with a slightly
random size, which is a negligible difference from resampling it directly. For binary verdicts the
exact two-sided McNemar test is reported too. The suite mean's paired interval averages the
per-benchmark bootstrap differences (benchmarks resampled independently, i.e. a stratified bootstrap).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

N_BOOT = 1000
MEAN_KEY = "_mean"


@dataclass
class ColumnData:
    """One benchmark's per-sample values: ``values[R, N]`` (0 where missing), ``mask[R, N]``,
    ``binary[R]`` (all values 0/1), ``weights[B, N]`` (bootstrap counts); ``rows`` names the R rows."""

    rows: list[str]
    values: np.ndarray
    mask: np.ndarray
    binary: np.ndarray
    weights: np.ndarray

    @classmethod
    def build(cls, per_row: dict[str, tuple[dict[str, float], bool]], n_boot: int, seed: str) -> ColumnData:
        rows = sorted(r for r, (values, _) in per_row.items() if values)
        ids = sorted({sid for r in rows for sid in per_row[r][0]})
        position = {sid: i for i, sid in enumerate(ids)}
        values = np.zeros((len(rows), len(ids)))
        mask = np.zeros((len(rows), len(ids)), dtype=bool)
        for i, r in enumerate(rows):
            cols = np.fromiter((position[s] for s in per_row[r][0]), dtype=np.int64)
            values[i, cols] = np.fromiter(per_row[r][0].values(), dtype=float)
            mask[i, cols] = True
        rng = np.random.default_rng(int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16))
        n = max(len(ids), 1)
        weights = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
        binary = np.array([per_row[r][1] for r in rows], dtype=bool)
        return cls(rows, values, mask, binary, weights)


class _SharedSetCache:
    """``W @ (S * r).T`` and ``W @ r`` for each distinct shared-id mask r met so far."""

    def __init__(self, column: ColumnData):
        self.column = column
        self.products: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def get(self, shared: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = np.packbits(shared).tobytes()
        if key not in self.products:
            col = self.column
            self.products[key] = (col.weights @ (col.values * shared).T, col.weights @ shared)
        return self.products[key]


def paired_comparisons(columns: dict[str, dict[str, tuple[dict[str, float], bool]]],
                       n_boot: int = N_BOOT) -> Iterator[tuple[str, dict[str, dict[str, list]]]]:
    """For each baseline row: ``{other row: {benchmark or "_mean": [delta, lo, hi, p_mcnemar, n_shared]}}``.

    ``columns`` maps benchmark -> row -> (sample id -> value, all-binary flag). ``delta`` is other minus
    baseline on shared ids; ``lo, hi`` the paired bootstrap 95% interval; ``p_mcnemar`` is ``None``
    unless both rows are binary. Rows without shared samples are absent.
    """
    data = {bench: ColumnData.build(per_row, n_boot, bench) for bench, per_row in sorted(columns.items())}
    caches = {bench: _SharedSetCache(col) for bench, col in data.items()}
    everyone = sorted({r for col in data.values() for r in col.rows})
    for baseline in everyone:
        table: dict[str, dict[str, list]] = {}
        boot_sum: dict[str, np.ndarray] = {}
        boot_count: dict[str, int] = {}
        point_sum: dict[str, float] = {}
        for bench, col in data.items():
            if baseline not in col.rows:
                continue
            for other, stats, boot in _against(col, caches[bench], col.rows.index(baseline)):
                table.setdefault(other, {})[bench] = stats
                boot_sum[other] = boot_sum.get(other, 0.0) + boot
                boot_count[other] = boot_count.get(other, 0) + 1
                point_sum[other] = point_sum.get(other, 0.0) + stats[0]
        shared_benches = sum(1 for col in data.values() if baseline in col.rows)
        for other, count in boot_count.items():
            if count == shared_benches == len(data) and count > 0:
                mean_boot = boot_sum[other] / count
                lo, hi = np.nanquantile(mean_boot, [0.025, 0.975])
                n = sum(stats[4] for key, stats in table[other].items())
                table[other][MEAN_KEY] = _rounded([point_sum[other] / count, lo, hi, None, n])
        yield baseline, table


def _against(col: ColumnData, cache: _SharedSetCache, b: int) -> Iterator[tuple[str, list, np.ndarray]]:
    """Stats of every row of ``col`` against row ``b``, grouped by shared-id pattern (usually one)."""
    patterns: dict[bytes, list[int]] = {}
    for a in range(len(col.rows)):
        if a != b:
            patterns.setdefault(np.packbits(col.mask[a]).tobytes(), []).append(a)
    for members in patterns.values():
        shared = col.mask[members[0]] & col.mask[b]
        n_shared = int(shared.sum())
        if n_shared == 0:
            continue
        products, counts = cache.get(shared)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (products[:, members] - products[:, [b]]) / counts[:, None]
        lo, hi = np.nanquantile(boot, [0.025, 0.975], axis=0)
        diffs = (col.values[members] - col.values[b]) @ shared / n_shared
        base_pass = col.values[b] * shared
        for j, a in enumerate(members):
            p = None
            if col.binary[a] and col.binary[b]:
                gained = int(round(float((col.values[a] * shared) @ (1 - col.values[b]))))
                lost = int(round(float(((1 - col.values[a]) * shared) @ base_pass)))
                p = mcnemar_exact(gained, lost)
            yield col.rows[a], _rounded([diffs[j], lo[j], hi[j], p, n_shared]), boot[:, j]


def mcnemar_exact(gained: int, lost: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts (a binomial test at 1/2)."""
    n = gained + lost
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * _binomial_half_cdf(n)[min(gained, lost)]))


@lru_cache(maxsize=4096)
def _binomial_half_cdf(n: int) -> np.ndarray:
    """``cdf[k] = P(X <= k)`` for X ~ Binomial(n, 1/2), computed in log space to stay exact-ish at large n."""
    k = np.arange(n + 1)
    log_pmf = (math.lgamma(n + 1) - np.vectorize(math.lgamma)(k + 1) - np.vectorize(math.lgamma)(n - k + 1)
               - n * math.log(2.0))
    return np.cumsum(np.exp(log_pmf))


def _rounded(stats: list) -> list:
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else
            (round(float(v), 6) if isinstance(v, (float, np.floating)) else v) for v in stats]
