"""The generate task: prompts rendered, generations cache-first, verdicts by the benchmark's verifier, each
step a pass over the benchmark's slices (harness/slices.py) keeping only flat request positions between.

- run (:func:`generate`): one pass finds the requests the generation cache lacks, a second hands them to the
  steps in pieces of whole batches, so the engine gets the batches one list of them all would give;
- score (:func:`score`): one pass finds the ready generations with no cached verdict, a second verifies them
  :data:`VERIFY_CHUNK` at a time (no new chunk once a stop has used half its grace), a third hands each ready
  sample's rows to ``out`` (samples.jsonl) and its verdicts to the metrics (one float per sample and metric).

So memory is flat in a benchmark's size, and the record is what scoring the whole list at once gave, byte for
byte. Steps that run over a whole benchmark themselves (``RunSteps.streams`` False: OpenCompass) get its
missing requests as one list.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from . import metrics as metric_lib
from . import stopping
from .cache import cache_key, verdicts_cache
from .engine import GenerationRequest
from .errors import EngineError
from .records import BenchmarkInfo, Generation, Sample, Verdict
from .slices import SLICE_REQUESTS, BenchmarkWork, pieces, plan_benchmark, positions
from .verifiers import verifiers
from .verifiers.base import verifier_identity

if TYPE_CHECKING:
    from .runner import EvalPlan, GenerationStore, RunState, RunSteps

VERIFY_CHUNK = 64
"""Generations verified (and their verdicts appended to the cache) at a time."""
Rows = Callable[[dict], None]


@dataclass
class BenchmarkResult:
    info: BenchmarkInfo
    metrics: dict
    counts: dict[str, int]
    rows: list[dict]
    """The samples.jsonl rows not already handed to ``out``."""


class GenerateTask:
    """A generated benchmark: prompts rendered, generations cache-first, verdicts by its verifier."""

    def plan(self, plan: EvalPlan, spec: Any) -> BenchmarkWork:
        return plan_benchmark(spec, plan.decoding, plan.limit)

    def prepare(self, plan: EvalPlan, work: BenchmarkWork) -> None:
        verifiers.get(work.spec.verifier)
        plan.engine.prepare(work.requests, plan.decoding)

    def run(self, plan: EvalPlan, work: BenchmarkWork, steps: RunSteps, store: GenerationStore,
            state: RunState) -> None:
        generate(plan, work, steps, store, state)

    def score(self, plan: EvalPlan, work: BenchmarkWork, steps: RunSteps, store: GenerationStore,
              state: RunState, verify: bool = True, out: Rows | None = None) -> BenchmarkResult:
        return score(plan, work, steps, store, state, verify, out)


GENERATE_TASK = GenerateTask()


def generate(plan: EvalPlan, work: BenchmarkWork, steps: RunSteps, generations: GenerationStore,
             state: RunState) -> None:
    """Generate the requests the cache lacks; each finished batch is cached, then a safe point."""
    name = work.spec.name
    todo = positions(work, lambda sample, reqs: [r not in generations for r in reqs])
    state.cached[name] = work.info["n_used"] * work.k - len(todo)
    state.generated[name] = 0
    if not todo:
        return
    stopping.safe_point()
    bar = plan.progress(f"{name}: generate", len(todo)) if plan.progress else None

    def store(batch: list[GenerationRequest], outputs: list[Generation]) -> None:
        if len(outputs) != len(batch):
            raise EngineError(f"engine {plan.engine.name} returned {len(outputs)} generations "
                              f"for {len(batch)} requests")
        generations.put(batch, outputs)
        state.generated[name] += len(batch)
        if bar:
            bar.update(len(batch))
        stopping.safe_point()  # the batch is cached: a stop asked for during it takes effect here

    t0 = time.monotonic()
    try:
        requests = (r for _, r in work.at(todo))
        if not getattr(steps, "streams", True):
            steps.generate(plan, work, list(requests), store, generations)
            return
        size = plan.decoding.batch_size  # pieces of whole batches: the batches of one list of them all
        for part in pieces(requests, max(1, SLICE_REQUESTS // size) * size):
            steps.generate(plan, work, part, store, generations)
    finally:
        state.timing[f"{name}.generate_s"] = round(time.monotonic() - t0, 3)
        if bar:
            bar.close()


def score(plan: EvalPlan, work: BenchmarkWork, steps: RunSteps, generations: GenerationStore, state: RunState,
          verify: bool = True, out: Rows | None = None) -> BenchmarkResult:
    """Verify every sample whose k generations are all available (cached verdicts reused); with ``verify``
    False, or once a stop has used half its grace period, only the cached verdicts count and the other
    samples are missing. Rows go to ``out`` as they are made (None: into the result)."""
    spec, k = work.spec, work.k
    options = plan.verifier_options_for(spec.name)
    verifier = verifiers.get(spec.verifier)(**options)
    verifier.use_cache_dir(plan.cache_dir)
    identity = verifier_identity(type(verifier), options)
    facts = verifier.cache_identity()
    verifier_id = cache_key(spec.verifier, verifier.version, identity.options, *([facts] if facts else []))[:16]
    vcache = verdicts_cache(plan.cache_dir, f"{spec.verifier}-{verifier_id}")

    def vkey(sample: Sample, gen: Generation) -> str:
        return cache_key(verifier_id, work.info["data_sha256"], sample.id, gen.text)

    def unverified(sample: Sample, reqs: list[GenerationRequest]) -> list[bool] | None:
        gens = [generations.get(r) for r in reqs]
        if any(g is None for g in gens):
            return None  # not ready: missing from the record
        return [vkey(sample, g) not in vcache for g in gens]

    # Positions only: each generation is read from the cache where it is needed
    todo = positions(work, unverified) if verify else []
    t0 = time.monotonic()
    try:
        if todo:
            bar = plan.progress(f"{spec.name}: verify", len(todo)) if plan.progress else None
            items = work.at(todo)
            while stopping.has_time():
                part = [(s, generations.get(r)) for s, r in islice(items, VERIFY_CHUNK)]
                if not part:
                    break
                verdicts = steps.verify(plan, work, verifier, part, generations)
                vcache.extend((vkey(s, g), v) for (s, g), v in zip(part, verdicts))
                if bar:
                    bar.update(len(part))
            if bar:
                bar.close()
        described = steps.describe(work, verifier)
    finally:
        verifier.close()
    if described:
        state.isolation[spec.name] = described
    state.timing[f"{spec.name}.verify_s"] = round(time.monotonic() - t0, 3)

    acc, rows, ready = metric_lib.Accumulator(spec.metrics, k), [], 0
    emit = out or rows.append
    for part in work.slices():
        for i, sample in enumerate(part.samples):
            reqs = part.requests[i * k : (i + 1) * k]
            gens = [generations.get(r) for r in reqs]
            if any(g is None for g in gens):
                continue
            keys = [vkey(sample, g) for g in gens]
            if not all(key in vcache for key in keys):
                continue
            verdicts = [vcache.get(key) for key in keys]
            acc.add(verdicts)
            ready += 1
            for req, gen, v in zip(reqs, gens, verdicts):
                emit(sample_row(spec.name, sample, req, gen, v))
    metric_values, counts = acc.result()
    counts.update(generated=state.generated.get(spec.name, 0), cached=state.cached.get(spec.name, 0),
                  missing=work.info["n_used"] - ready)
    return BenchmarkResult(benchmark_info(plan, work), metric_values, counts, rows)


def benchmark_info(plan: EvalPlan, work: BenchmarkWork) -> BenchmarkInfo:
    """A benchmark's identity in the record: data, prompt template, verifier (name, version, options)."""
    cls = verifiers.get(work.spec.verifier)
    identity = verifier_identity(cls, plan.verifier_options_for(work.spec.name))
    return BenchmarkInfo(**work.info, verifier=work.spec.verifier, verifier_version=cls.version,
                         verifier_args=work.spec.verifier_args, verifier_options=identity.options)


def sample_row(benchmark: str, sample: Sample, req: GenerationRequest, gen: Generation, v: Verdict) -> dict:
    """One samples.jsonl row (shared by every runner that writes a RunRecord, e.g. the OpenCompass one)."""
    return {
        "benchmark": benchmark, "id": sample.id, "index": req.index,
        "messages": [m.model_dump() for m in req.messages], "reference": sample.reference,
        "completion": gen.text, "answer": v.answer, "passed": v.passed, "score": v.score, "status": v.status,
        "details": v.details, "nfe": gen.nfe, "nfe_official": gen.nfe_official, "finish_reason": gen.finish_reason,
    }
