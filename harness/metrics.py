"""Metrics over verdicts: accuracy, unbiased pass@k and partial credit, each with a bootstrap 95% CI.

Input is one list of verdicts per sample (its k generations). Samples with any infrastructure error
(``status == "error"``) or with no scored verdict are left out of every metric and counted apart: an
infrastructure failure is never a model failure. The bootstrap resamples samples (not generations)
with a fixed seed, so the same verdicts always give the same interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import comb

import numpy as np

from .records import MetricValue, Verdict
from .registry import metrics

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
BOOTSTRAP_CHUNK_VALUES = 1 << 20  # resampled values held at once (16 MiB with their indices)

PerSample = Callable[[Sequence[Verdict]], float]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k) for n samples with c correct."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def bootstrap_ci(values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean of ``values`` (shape ``(n,)``)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    # A few resamples at a time: the whole (resamples, n) index matrix is 16 KB per sample (1.6 GB at 100k
    # samples). The generator yields the same draws in chunks as in one call, so the interval is unchanged.
    chunk = max(1, min(resamples, BOOTSTRAP_CHUNK_VALUES // arr.size))
    means = np.concatenate([arr[rng.integers(0, arr.size, size=(min(chunk, resamples - start), arr.size))].mean(axis=1)
                            for start in range(0, resamples, chunk)])
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (float(lo), float(hi))


def summarize(per_sample: Sequence[float]) -> MetricValue:
    values = list(per_sample)
    mean = float(np.mean(values)) if values else 0.0
    return MetricValue(value=mean, ci=bootstrap_ci(values), n=len(values))


def accuracy(verdicts: Sequence[Verdict]) -> float:
    """Fraction of a sample's k generations that passed (the plain accuracy when k = 1)."""
    return sum(v.passed for v in verdicts) / len(verdicts)


def partial_credit(verdicts: Sequence[Verdict]) -> float:
    """Mean partial credit (e.g. Sudoku cells filled correctly); falls back to the score."""
    return sum(float(v.details.get("partial_credit", v.score)) for v in verdicts) / len(verdicts)


def pass_at(k: int) -> PerSample:
    def metric(verdicts: Sequence[Verdict]) -> float:
        return pass_at_k(len(verdicts), sum(v.passed for v in verdicts), k)

    return metric


# A registered metric is a family: given k (generations per sample) it names its per-sample functions.
metrics.register("accuracy", lambda k: {"accuracy": accuracy})
metrics.register("partial_credit", lambda k: {"partial_credit": partial_credit})
metrics.register(
    "pass@k", lambda k: {f"pass@{j}": pass_at(j) for j in sorted({1, k, *(2**i for i in range(1, k.bit_length()))})}
)

# likelihood-scored multiple choice (harness/choice.py): lm-eval's acc, acc_norm and TruthfulQA's mc2
for _name in ("acc", "acc_norm", "mc2"):
    metrics.register(_name, f"dare.harness.choice:{_name}_metric")


def expand(name: str, k: int) -> dict[str, PerSample]:
    """The per-sample functions of a benchmark's metric name (``pass@k`` gives pass@1, 2, 4, ..., k)."""
    return metrics.get(name)(k)


def compute(names: Sequence[str], per_sample_verdicts: Sequence[Sequence[Verdict]],
            k: int) -> tuple[dict[str, MetricValue], dict[str, int]]:
    """Metrics over the samples whose verdicts are all usable, and the status counts.

    Returns ``({metric: MetricValue}, {"scored": .., "error": .., "unscored": ..})`` where the counts are
    over samples: a sample with an infrastructure error in any of its k verdicts is ``error``.
    """
    usable: list[Sequence[Verdict]] = []
    counts = {"scored": 0, "error": 0, "unscored": 0}
    for verdicts in per_sample_verdicts:
        if any(v.status == "error" for v in verdicts):
            counts["error"] += 1
        elif not verdicts or any(v.status == "unscored" for v in verdicts):
            counts["unscored"] += 1
        else:
            counts["scored"] += 1
            usable.append(verdicts)
    out: dict[str, MetricValue] = {}
    for name in names:
        for metric_name, fn in expand(name, k).items():
            out[metric_name] = summarize([fn(v) for v in usable])
    return out, counts
