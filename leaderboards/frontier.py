"""Accuracy-speed frontiers: runs that differ only in their decoding strategy, and their Pareto front.

Grouping rule. Two complete runs share a frontier when everything but the strategy is equal:

* the model (name, weight fingerprint, training run and step) and the suite;
* per benchmark the comparability guards' data sha256, prompt template hash and verifier identity
  (:data:`~.comparability.IDENTITY_GUARDS`), and the number of samples used (the same samples);
* every DecodingConfig field outside :data:`STRATEGY_FIELDS`: the canvas (gen_length, block_length),
  sampling (temperature, top_p, top_k, cfg_scale, seed, num_samples, stop_at_eos) and ``batch_size``,
  which is execution-only for scores but not for speed;
* the machine the speed was measured on (:data:`MACHINE_FIELDS` of the environment, and the engine's
  device and dtype).

The strategy itself, what varies along a frontier, is the engine (and its options), the decoder (and its
typed options) and :data:`STRATEGY_FIELDS` (remasking rule, step budget, parallel-commit threshold or
factor, cache mode). A strategy run twice counts once (the newest run). Groups with one strategy have
no frontier. Partial and failed runs never enter (their timing covers an unknown share of the work),
nor runs without metrics.

Speed comes from the record: tokens/s = generations x gen_length (canvas tokens, as
benchmarks/decode_frontier.py counts them) over the benchmarks' ``generate_s`` timings, with
``counts.generated`` as the number of generations timed (cached ones cost no time and are not counted;
a run that generated nothing has no tokens/s). NFE per token = the samples' ``nfe`` summed over
(generations x gen_length); tokens per forward (TPF) is its inverse, per benchmark too
(:func:`.aup.tokens_per_forward`). Speed ratios on the page divide by :func:`reference_point`'s run, and
each strategy's AUP is scored against it (:mod:`.frontier_aup`).
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dare.harness.records import DecodingConfig, RunRecord, canonical_json

from .aup import tokens_per_forward
from .comparability import IDENTITY_GUARDS, reference_order
from .frontier_aup import score_group
from .loading import LoadedRun, iter_sample_lines, slug
from .table import Z95, primary_metric, training_run

STRATEGY_FIELDS = ("remasking", "steps", "threshold", "factor", "cache", "alg_temp", "extra")
MACHINE_FIELDS = ("cpu", "cpu_count", "cpu_capability", "torch_threads", "gpu")
SHARED_GUARDS = ("data", "prompt", "verifier")
#: Engines a point's label leaves unnamed: the native engine, which every strategy runs on unless a run
#: says otherwise (dare-eval's default), so a label names only an engine that differs from it.
UNNAMED_ENGINES = frozenset({"torch"})
#: Fields a label shows as ``name value`` when set (they are None by default).
LABELLED_VALUES = ("threshold", "factor", "alg_temp")
_DEFAULTS = DecodingConfig()


@dataclass
class BenchmarkPoint:
    """One benchmark of a point: its primary metric (a fraction), TPF, and AUP (None with a ``note``)."""

    accuracy: float
    tpf: float | None
    aup: float | None = None
    note: str | None = None


@dataclass
class Point:
    """One strategy's run on a frontier. ``accuracy``/``ci``: the suite mean of the primary metrics."""

    run: LoadedRun
    label: str
    accuracy: float
    ci: tuple[float, float]
    n: int
    tokens_per_s: float | None
    nfe_per_token: float | None
    front_speed: bool = False  # on the (accuracy up, tokens/s up) Pareto front
    front_nfe: bool = False  # on the (accuracy up, NFE per token down) Pareto front
    tpf: float | None = None  # canvas tokens per forward over the suite: 1 / nfe_per_token
    benchmarks: dict[str, BenchmarkPoint] = field(default_factory=dict)
    aup: float | None = None  # the mean of the benchmarks' AUPs (frontier_aup.py); None with aup_note
    aup_note: str | None = None

    @property
    def benchmark(self) -> str:
        return sorted(self.run.record.benchmarks)[0]


@dataclass
class Frontier:
    """Every strategy of one group; ``shared`` describes what the points have in common, for the page."""

    key: str
    points: list[Point]
    shared: dict[str, Any] = field(default_factory=dict)
    reference: Point | None = None  # what the speed ratios divide by: see :func:`reference_point`
    y_max: dict[str, float] = field(default_factory=dict)  # benchmark -> the AUP's pool best, in percent


def group_key(record: RunRecord) -> str:
    """The grouping rule of the module docstring as one canonical string."""
    guards = {kind: read for kind, _, read in IDENTITY_GUARDS if kind in SHARED_GUARDS}
    benchmarks = {name: {kind: read(record, info) for kind, read in guards.items()} | {"n_used": info.n_used}
                  for name, info in sorted(record.benchmarks.items())}
    decoding = record.decoding.model_dump(exclude=set(STRATEGY_FIELDS))
    identity = record.engine_identity or {}
    machine = {k: getattr(record.environment, k) for k in MACHINE_FIELDS} | \
        {"device": identity.get("device"), "dtype": identity.get("dtype")}
    training = record.model.training
    return canonical_json([record.suite, record.model.name, record.model.fingerprint, training_run(training),
                           training.step if training else None, benchmarks, decoding, machine])


def strategy_key(record: RunRecord) -> str:
    decoder = record.decoder.model_dump(mode="json") if record.decoder else None
    fields = {k: v for k, v in record.decoding.model_dump(mode="json").items() if k in STRATEGY_FIELDS}
    return canonical_json([record.backend.name, record.backend.options, decoder, fields])


def pareto(values: list[tuple[float, float]]) -> list[bool]:
    """Which (accuracy, speed) pairs no other pair dominates (both higher is better).

    q dominates p when q is at least as good on both axes and better on one; equal pairs do not
    dominate each other, so a tie sits on the front together.
    """
    return [not any(a >= x and s >= y and (a > x or s > y) for a, s in values) for x, y in values]


# run -> benchmark -> (NFE summed, generations); a benchmark with a line that records no NFE is left out
NfeSums = Callable[[LoadedRun], "dict[str, tuple[int, int]]"]


def frontier_groups(runs: list[LoadedRun]) -> dict[str, list[LoadedRun]]:
    """Group key -> one run per strategy (the newest), for the groups of two or more strategies."""
    groups: dict[str, dict[str, LoadedRun]] = defaultdict(dict)
    for run in sorted(runs, key=lambda r: (r.record.created_at, r.key)):
        if run.record.status == "complete" and run.record.metrics and all(run.record.metrics.values()):
            groups[group_key(run.record)][strategy_key(run.record)] = run  # the newest rerun wins
    return {key: list(by.values()) for key, by in sorted(groups.items()) if len(by) >= 2}


def build_frontiers(runs: list[LoadedRun], nfe_sums: NfeSums | None = None) -> list[Frontier]:
    """One :class:`Frontier` per group of :func:`frontier_groups`.

    ``nfe_sums``: where a run's NFE comes from (the site build passes what its one pass over the
    samples counted); by default each point's samples.jsonl is read here.
    """
    frontiers = []
    for key, group in frontier_groups(runs).items():
        points = [_point(run, nfe_sums or _read_nfe) for run in group]
        points.sort(key=lambda p: (-p.accuracy, -(p.tokens_per_s or 0.0), p.label))
        _name_points(points)
        _mark_fronts(points)
        reference = reference_point(points)
        y_max = score_group(points, reference)
        digest = hashlib.sha256(key.encode()).hexdigest()[:8]
        frontiers.append(Frontier(digest, points, _shared(points[0].run.record), reference, y_max))
    return frontiers


def reference_point(points: list[Point]) -> Point:
    """The point decoded with DecodingConfig's default strategy (low-confidence remasking, no cache, no
    threshold, factor or options, one token per step), as decode_frontier.py's reference; the oldest of
    several (the comparability order), and the oldest point where none is plain."""
    defaults = DecodingConfig().model_dump()

    def plain(record: RunRecord) -> bool:
        decoding = record.decoding.model_dump()
        return decoding["steps"] == decoding["gen_length"] and all(
            decoding[name] == defaults[name] for name in STRATEGY_FIELDS if name != "steps")

    candidates = [p for p in points if plain(p.run.record)] or points
    return min(candidates, key=lambda p: reference_order(p.run.record))


def page_name(model: str, suite: str) -> str:
    """The site-relative file of a (model, suite)'s frontier page."""
    digest = hashlib.sha256(canonical_json([model, suite]).encode()).hexdigest()[:6]
    return f"frontier/{slug(model, 32)}-{slug(suite, 24)}-{digest}.html"


def _point(run: LoadedRun, nfe_sums: NfeSums) -> Point:
    record = run.record
    canvas = record.decoding.gen_length
    sums = nfe_sums(run)
    values, benchmarks = [], {}
    for bench in sorted(record.metrics):
        metric = record.metrics[bench][primary_metric(sorted(record.metrics[bench]))]
        values.append(metric)
        nfe, lines = sums.get(bench, (0, 0))
        benchmarks[bench] = BenchmarkPoint(metric.value, tokens_per_forward(lines, canvas, nfe))
    accuracy = sum(m.value for m in values) / len(values)
    # As the table's suite mean: each benchmark's standard error read back from its 95% interval.
    se = math.sqrt(sum(((m.ci[1] - m.ci[0]) / (2 * Z95)) ** 2 for m in values)) / len(values)
    ci = (values[0].ci[0], values[0].ci[1]) if len(values) == 1 else \
        (max(0.0, accuracy - Z95 * se), min(1.0, accuracy + Z95 * se))
    generated = sum(c.get("generated", 0) for c in record.counts.values())
    seconds = sum(record.timing.benchmark(bench).generate_s or 0.0 for bench in record.benchmarks)
    speed = generated * canvas / seconds if generated and seconds > 0 else None
    counted = all(bench in sums for bench in benchmarks)  # a suite figure needs every benchmark's NFE
    nfe = sum(sums[b][0] for b in benchmarks) if counted else 0
    lines = sum(sums[b][1] for b in benchmarks) if counted else 0
    per_token = nfe / (lines * canvas) if lines else None  # forwards per canvas token
    return Point(run, _label(record), accuracy, ci, sum(m.n for m in values), speed, per_token,
                 tpf=tokens_per_forward(lines, canvas, nfe), benchmarks=benchmarks)


def _read_nfe(run: LoadedRun) -> dict[str, tuple[int, int]]:
    """Benchmark -> (NFE summed, lines) over the run's samples.jsonl; a benchmark with a line that
    records no NFE is left out, and so is everything when the file is missing."""
    path = run.samples_file
    if not path.is_file() or not path.resolve().is_relative_to(run.directory.resolve()):
        return {}
    sums: dict[str, list[int]] = {}
    broken: set[str] = set()
    for _, sample in iter_sample_lines(path):
        bench, nfe = str(sample.get("benchmark")), sample.get("nfe")
        if not isinstance(nfe, int) or isinstance(nfe, bool):
            broken.add(bench)
            continue
        entry = sums.setdefault(bench, [0, 0])
        entry[0], entry[1] = entry[0] + nfe, entry[1] + 1
    return {bench: (total, lines) for bench, (total, lines) in sums.items() if bench not in broken}


def _label(record: RunRecord) -> str:
    """``klass``, ``fastdllm · low_confidence · dual · threshold 0.9``: the engine when not torch, the
    decoder's rule (its registry name after the last colon; the full name is in the page's table), then
    the strategy fields set away from their defaults (``steps`` only where the decoder reads it)."""
    decoding = record.decoding
    parts = [record.backend.name] if record.backend.name not in UNNAMED_ENGINES else []
    parts.append((record.decoder.name if record.decoder else decoding.remasking).rsplit(":", 1)[-1])
    if decoding.cache != _DEFAULTS.cache:
        parts.append(decoding.cache)
    parts += [f"{name} {getattr(decoding, name):g}" for name in LABELLED_VALUES if getattr(decoding, name) is not None]
    read = record.decoding_fields  # None: every field (records written before the read fields were recorded)
    if decoding.steps != decoding.gen_length and (read is None or "steps" in read):
        parts.append(f"steps {decoding.steps}")
    return " · ".join(parts)


def _name_points(points: list[Point]) -> None:
    """Points whose labels coincide (same decoder, other typed options) get their run id appended."""
    counts: dict[str, int] = defaultdict(int)
    for point in points:
        counts[point.label] += 1
    for point in points:
        if counts[point.label] > 1:
            point.label += f" ({point.run.record.run_id})"


def _mark_fronts(points: list[Point]) -> None:
    timed = [p for p in points if p.tokens_per_s is not None]
    for point, on in zip(timed, pareto([(p.accuracy, p.tokens_per_s) for p in timed])):
        point.front_speed = on
    counted = [p for p in points if p.nfe_per_token is not None]
    for point, on in zip(counted, pareto([(p.accuracy, -p.nfe_per_token) for p in counted])):
        point.front_nfe = on


def _shared(record: RunRecord) -> dict[str, Any]:
    decoding = record.decoding
    env = record.environment
    machine = ", ".join(str(v) for v in (
        env.gpu or env.cpu, f"{env.cpu_count} cores" if env.cpu_count else None,
        f"{env.torch_threads} torch thread(s)" if env.torch_threads else None,
        env.cpu_capability) if v)
    return {"model": record.model.name, "fingerprint": record.model.fingerprint, "suite": record.suite,
            "benchmarks": {b: i.n_used for b, i in sorted(record.benchmarks.items())},
            "gen_length": decoding.gen_length, "block_length": decoding.block_length,
            "temperature": decoding.temperature, "batch_size": decoding.batch_size,
            "device": (record.engine_identity or {}).get("device"), "machine": machine or "unrecorded"}
