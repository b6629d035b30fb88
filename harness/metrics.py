"""Metrics over verdicts: accuracy, unbiased pass@k and partial credit, each with a bootstrap 95% CI.

Input is one list of verdicts per sample (its k generations). Samples with any infrastructure error
(``status == "error"``) or with no scored verdict are left out of every metric and counted apart: an
infrastructure failure is never a model failure. The bootstrap resamples samples (not generations)
with a fixed seed, so the same verdicts always give the same interval.
"""

from __future__ import annotations

from array import array
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


def summarize(per_sample: Sequence[float] | np.ndarray) -> MetricValue:
    values = np.asarray(per_sample, dtype=np.float64)
    mean = float(np.mean(values)) if values.size else 0.0
    return MetricValue(value=mean, ci=bootstrap_ci(values), n=int(values.size))


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


class Accumulator:
    """Metrics built one sample at a time: :meth:`add` each sample's verdicts (its k generations), in sample
    order, then :meth:`result`. Holds per metric one float (8 bytes) per usable sample and the status
    counts, not the verdicts, so a benchmark can be scored in slices; the bootstrap sees the same values in
    the same order as :func:`compute` over the whole list."""

    def __init__(self, names: Sequence[str], k: int):
        self.functions: dict[str, PerSample] = {}
        for name in names:
            self.functions.update(expand(name, k))
        self.values = {metric_name: array("d") for metric_name in self.functions}
        self.counts = {"scored": 0, "error": 0, "unscored": 0}

    def add(self, verdicts: Sequence[Verdict]) -> None:
        """One sample: with an infrastructure error in any verdict it is ``error``, with none scored or any
        unscored ``unscored``, else ``scored`` and its per-sample value counts in every metric."""
        if any(v.status == "error" for v in verdicts):
            self.counts["error"] += 1
        elif not verdicts or any(v.status == "unscored" for v in verdicts):
            self.counts["unscored"] += 1
        else:
            self.counts["scored"] += 1
            for metric_name, fn in self.functions.items():
                self.values[metric_name].append(fn(verdicts))

    def result(self) -> tuple[dict[str, MetricValue], dict[str, int]]:
        """``({metric: MetricValue}, {"scored": .., "error": .., "unscored": ..})``."""
        return ({name: summarize(np.frombuffer(values, dtype=np.float64)) for name, values in self.values.items()},
                dict(self.counts))


def compute(names: Sequence[str], per_sample_verdicts: Sequence[Sequence[Verdict]],
            k: int) -> tuple[dict[str, MetricValue], dict[str, int]]:
    """Metrics over the samples whose verdicts are all usable, and the status counts.

    Returns ``({metric: MetricValue}, {"scored": .., "error": .., "unscored": ..})`` where the counts are
    over samples: a sample with an infrastructure error in any of its k verdicts is ``error``.
    """
    acc = Accumulator(names, k)
    for verdicts in per_sample_verdicts:
        acc.add(verdicts)
    return acc.result()
