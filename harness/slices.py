"""A generated benchmark in bounded slices: never held whole, from its data file to its record.

:class:`BenchmarkWork` reads a benchmark's rows from the data file as they are asked for and hands them out
as :class:`Slice` s of at most :data:`SLICE_REQUESTS` requests (samples, their rendered requests). Each step
of the generate task (harness/generate_run.py) passes over the slices and keeps, between passes, only flat
request positions (:func:`positions`, 8 bytes a request). Planning reads every row once (``n_total``, each
row a Sample, each used one rendered), so bad data is refused before any compute, as when the benchmark was
loaded whole. ``work.samples`` and ``work.requests`` stream the same slices as read-only sequences, for
``engine.prepare`` and for steps that run over a whole benchmark themselves (OpenCompass).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from . import config as cfg
from .data import iter_rows, row_to_sample, verified_path
from .engine import GenerationRequest, request_seed
from .prompts import PromptTemplate, template
from .records import DecodingConfig, Sample

SLICE_REQUESTS = 1024
"""Requests (samples times k) a slice holds: at most a few MiB of samples and prompts at a time."""


@dataclass
class Slice:
    start: int
    """Index of its first sample among the benchmark's used samples."""
    samples: list[Sample]
    requests: list[GenerationRequest]
    """k per sample, sample by sample (flat position ``sample * k + index``)."""


@dataclass
class BenchmarkWork:
    """One generated benchmark of a run: its spec, its facts for the record (``info``: data sha256, n_total,
    n_used, prompt template) and what its requests are made of (the run seed, k)."""

    spec: cfg.BenchmarkSpec
    info: dict[str, Any]
    seed: int = 0
    k: int = 1

    def slices(self) -> Iterator[Slice]:
        """The used samples and their requests, in order, ``SLICE_REQUESTS // k`` samples at a time."""
        per, tmpl = max(1, SLICE_REQUESTS // self.k), template(self.spec.prompt)
        start, samples = 0, []
        for row in iter_rows(self.spec.data, limit=self.info["n_used"]):
            samples.append(row_to_sample(row))
            if len(samples) == per:
                yield self._slice(start, samples, tmpl)
                start, samples = start + per, []
        if samples:
            yield self._slice(start, samples, tmpl)

    def _slice(self, start: int, samples: list[Sample], tmpl: PromptTemplate) -> Slice:
        requests = []
        for s in samples:
            messages = tmpl.render(s)  # one rendering serves the k requests: the same messages, as before
            requests.extend(GenerationRequest(s.id, i, messages, request_seed(self.seed, s.id, i))
                            for i in range(self.k))
        return Slice(start, samples, requests)

    def at(self, positions: Iterable[int]) -> Iterator[tuple[Sample, GenerationRequest]]:
        """``(sample, request)`` at each flat request position (ascending), reading the slices as far as needed."""
        wanted = iter(positions)
        pos = next(wanted, None)
        for part in self.slices() if pos is not None else ():
            first, end = part.start * self.k, (part.start + len(part.samples)) * self.k
            while pos is not None and pos < end:
                yield part.samples[(pos - first) // self.k], part.requests[pos - first]
                pos = next(wanted, None)
            if pos is None:
                return

    @property
    def samples(self) -> Sequence[Sample]:
        """The used samples, streamed from the data file each time they are iterated."""
        return Streamed(self, "samples", self.info["n_used"])

    @property
    def requests(self) -> Sequence[GenerationRequest]:
        """Every request (k per sample), streamed from the data file each time they are iterated."""
        return Streamed(self, "requests", self.info["n_used"] * self.k)


class Streamed(Sequence):
    """A benchmark's samples or requests as a read-only sequence that reads the data file on each pass
    (``engine.prepare`` and an engine's own steps read it like a list; indexing walks to the item)."""

    def __init__(self, work: BenchmarkWork, field: str, length: int):
        self.work, self.field, self.length = work, field, length

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[Any]:
        for part in self.work.slices():
            yield from getattr(part, self.field)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(self)[index]
        i = index + self.length if index < 0 else index
        if not 0 <= i < self.length:
            raise IndexError(f"index {index} out of range for {self.length} {self.field}")
        return next(islice(iter(self), i, None))


def plan_benchmark(spec: cfg.BenchmarkSpec, decoding: DecodingConfig, limit: int | None) -> BenchmarkWork:
    """Read the benchmark once (every row a Sample, each used sample rendered: bad data fails here, before
    any compute) and keep only its facts."""
    tmpl = template(spec.prompt)
    n_total = 0
    for row in iter_rows(spec.data):
        sample = row_to_sample(row)
        if limit is None or n_total < limit:
            tmpl.render(sample)
        n_total += 1
    _, sha = verified_path(spec.data)
    info = dict(
        name=spec.name, version=spec.version, data_file=spec.data, dataset_version=spec.dataset_version,
        data_sha256=sha, n_total=n_total, n_used=n_total if limit is None else min(limit, n_total),
        prompt_template=spec.prompt, prompt_template_hash=tmpl.template_hash(),
    )
    return BenchmarkWork(spec, info, decoding.seed, decoding.num_samples)


def pieces(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    it = iter(items)
    while part := list(islice(it, size)):
        yield part


def positions(work: BenchmarkWork, wanted: Any) -> array:
    """Flat positions of the requests ``wanted(sample, requests_of_the_sample)`` returns True for, per
    request (a list of k booleans), or None for none of them."""
    out, k = array("q"), work.k
    for part in work.slices():
        for i, sample in enumerate(part.samples):
            flags = wanted(sample, part.requests[i * k : (i + 1) * k])
            if flags:
                out.extend((part.start + i) * k + j for j, flag in enumerate(flags) if flag)
    return out
