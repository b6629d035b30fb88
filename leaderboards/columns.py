"""The leaderboard's columns: one per (benchmark, dataset version) within a suite.

A score is only comparable with another (or with a paper's) on the same data release: MBPP+ v0.1.0 has
399 tasks, v0.2.0 378. So runs of ``mbppplus`` on two releases get two columns ("mbppplus v0.1.0",
"mbppplus v0.2.0"), each with its own comparability reference, and never one suite mean.

Records written before run.json carried ``dataset_version`` are placed by their data sha256, which is what
decides the dataset: when versioned runs of the same benchmark recorded exactly one version for those bytes,
the old record takes it (same bytes, same release; the cell says it was inferred). Otherwise it goes to a
column of its own, "<benchmark> (version unknown)".

A likelihood-scored benchmark's score is an estimate whose value depends on the estimator (``mc_num`` 1 or 128
Monte-Carlo samples, CFG 0 or 0.5): its column also holds the estimator's name, version and options, so two
estimators never share a column, a reference or a mean.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dare.harness.records import BenchmarkInfo

from .loading import LoadedRun

UNKNOWN_VERSION = "version unknown"


@dataclass(frozen=True)
class Column:
    """One column of a suite table: a benchmark on one dataset release (``None``: not known)."""

    benchmark: str
    dataset_version: str | None
    estimator: str | None = None
    """A likelihood-scored benchmark's estimator (:func:`estimator_label`); None: a generated benchmark."""

    @property
    def id(self) -> str:
        """The column's key in the page data and exports: ``mbppplus@v0.2.0``; the bare benchmark name when
        the version is unknown (so tables built from older records keep their column keys); ``#`` and the
        estimator after it for a likelihood-scored benchmark."""
        base = self.benchmark if self.dataset_version is None else f"{self.benchmark}@{self.dataset_version}"
        return base if self.estimator is None else f"{base}#{self.estimator}"

    @property
    def label(self) -> str:
        """What the header shows: ``mbppplus v0.2.0`` or ``mbppplus (version unknown)``, then the estimator."""
        base = f"{self.benchmark} {self.dataset_version}" if self.dataset_version else \
            f"{self.benchmark} ({UNKNOWN_VERSION})"
        return base if self.estimator is None else f"{base} · {self.estimator}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "benchmark": self.benchmark, "dataset_version": self.dataset_version,
                "estimator": self.estimator, "label": self.label}


def estimator_label(info: BenchmarkInfo) -> str | None:
    """``lladamc v1 cfg=0.5 mc_num=128``: the estimator and every recorded option (None: a generated benchmark)."""
    est = info.estimator
    if est is None:
        return None
    return " ".join([est.name, f"v{est.version}", *(f"{k}={est.options[k]}" for k in sorted(est.options))])


@dataclass(frozen=True)
class PlacedBenchmark:
    """Where one benchmark of one run goes: its column, and whether the version was inferred from the data
    sha256 (the run predates ``dataset_version``) rather than recorded."""

    column: Column
    inferred: bool = False


class VersionIndex:
    """The versions that versioned runs recorded per (benchmark, data sha256), for placing older records."""

    def __init__(self, runs: Iterable[LoadedRun]):
        seen: dict[tuple[str, str], set[str]] = defaultdict(set)
        for run in runs:
            for name, info in run.record.benchmarks.items():
                if info.dataset_version is not None:
                    seen[(name, info.data_sha256)].add(info.dataset_version)
        # bytes recorded under two versions (a mislabelled config) name no version: the old record stays unknown
        self._known = {key: next(iter(versions)) for key, versions in seen.items() if len(versions) == 1}

    def place(self, benchmark: str, info: BenchmarkInfo | None) -> PlacedBenchmark:
        if info is None:  # metrics without an identity: an unknown column, which gets no cell
            return PlacedBenchmark(Column(benchmark, None))
        estimator = estimator_label(info)
        if info.dataset_version is not None:
            return PlacedBenchmark(Column(benchmark, info.dataset_version, estimator))
        inferred = self._known.get((benchmark, info.data_sha256))
        return PlacedBenchmark(Column(benchmark, inferred, estimator), inferred is not None)

    def columns_of(self, run: LoadedRun) -> dict[str, PlacedBenchmark]:
        """Benchmark name -> its placement, for every benchmark the run has metrics for."""
        return {name: self.place(name, run.record.benchmarks.get(name)) for name in run.record.metrics}


def column_order(column: Column) -> tuple:
    """Benchmarks alphabetically; within one, the unknown version first, then versions by name."""
    return (column.benchmark, column.dataset_version is not None, column.dataset_version or "", column.estimator or "")
