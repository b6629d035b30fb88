"""The evaluation loop: samples -> cached generations -> verdicts -> metrics -> run directory.

For each benchmark of the suite: load the shipped samples, render prompts, ask the engine for the
generations the cache lacks (in batches, each appended to the cache before the next starts), verify
(verdicts cached by verifier version), aggregate. The run directory gets ``samples.jsonl`` and
``run.json`` written atomically; an interrupted run still writes a ``partial`` record of what finished,
and a rerun resumes from the cache with the same final result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import config as cfg
from . import metrics as metric_lib
from .cache import cache_key, generations_cache, verdicts_cache
from .data import load_samples, verified_path
from .engine import Engine, GenerationRequest, request_seed
from .prompts import template
from .records import BenchmarkInfo, ComponentInfo, DecodingConfig, Generation, RunRecord, Sample, Verdict
from .verifiers import verifiers
from .rundir import environment_info, new_run_dir, write_run

log = logging.getLogger(__name__)
Progress = Callable[[str, int], Any]  # (description, total) -> object with update(n) and close()


@dataclass
class EvalPlan:
    """Everything resolved before the first generation."""

    suite: cfg.SuiteSpec
    decoding: DecodingConfig
    engine: Engine
    model_name: str
    out_dir: Path
    cache_dir: Path
    limit: int | None = None
    verifier_options: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    progress: Progress | None = None
    run_dir: Path | None = None
    """Set by :func:`run_eval` once the directory exists (so an interrupted caller can name it)."""


@dataclass
class BenchmarkWork:
    spec: cfg.BenchmarkSpec
    samples: list[Sample]
    requests: list[GenerationRequest]
    info: dict[str, Any]


def plan_benchmark(spec: cfg.BenchmarkSpec, decoding: DecodingConfig, limit: int | None) -> BenchmarkWork:
    all_samples = load_samples(spec.data)
    samples = all_samples[:limit] if limit is not None else all_samples
    tmpl = template(spec.prompt)
    requests = [
        GenerationRequest(s.id, i, tmpl.render(s), request_seed(decoding.seed, s.id, i))
        for s in samples
        for i in range(decoding.num_samples)
    ]
    _, sha = verified_path(spec.data)
    info = dict(
        name=spec.name, version=spec.version, data_file=spec.data, data_sha256=sha, n_total=len(all_samples),
        n_used=len(samples), prompt_template=spec.prompt, prompt_template_hash=tmpl.template_hash(),
    )
    return BenchmarkWork(spec, samples, requests, info)


def run_eval(plan: EvalPlan) -> Path:
    """Run the plan and return the run directory (created before the first generation)."""
    created = datetime.now(timezone.utc)
    works = [plan_benchmark(cfg.benchmark(b), plan.decoding, plan.limit) for b in plan.suite.benchmarks]
    for work in works:  # refuse bad input before any compute is spent
        verifiers.get(work.spec.verifier)
        plan.engine.prepare(work.requests, plan.decoding)
    run_dir = plan.run_dir = new_run_dir(plan.out_dir, plan.suite.name, plan.model_name, plan.decoding.config_hash(), created)
    model_info = plan.engine.model_info()
    gen_cache = generations_cache(plan.cache_dir, model_info.fingerprint, plan.decoding.config_hash())
    state = RunState()
    started = time.monotonic()
    try:
        for work in works:
            _generate(plan, work, gen_cache, model_info.fingerprint, state)
        status = "complete"
    except BaseException:
        status = "partial"
        raise
    finally:
        # Also on interruption: whatever finished is scored and recorded, marked partial.
        results = {w.spec.name: _score(plan, w, gen_cache, model_info.fingerprint, state) for w in works}
        state.timing["total_s"] = round(time.monotonic() - started, 3)
        record = RunRecord(
            run_id=run_dir.name, status=status, created_at=created.isoformat(),
            finished_at=datetime.now(timezone.utc).isoformat(), suite=plan.suite.name,
            benchmarks={n: r.info for n, r in results.items()}, model=model_info,
            backend=ComponentInfo(name=plan.engine.name, version=plan.engine.version),
            decoding=plan.decoding, metrics={n: r.metrics for n, r in results.items()},
            counts={n: r.counts for n, r in results.items()}, isolation=state.isolation, flags=plan.flags,
            timing=state.timing, environment=environment_info(), command=plan.command,
        )
        write_run(run_dir, record, [row for r in results.values() for row in r.rows])
    return run_dir


@dataclass
class RunState:
    generated: dict[str, int] = field(default_factory=dict)
    cached: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    isolation: dict[str, Any] = field(default_factory=dict)


def _gen_key(fingerprint: str, decoding: DecodingConfig, req: GenerationRequest) -> str:
    return cache_key(fingerprint, decoding.config_hash(), req.prompt_hash, req.index, req.seed)


def _generate(plan: EvalPlan, work: BenchmarkWork, cache, fingerprint: str, state: RunState) -> None:
    name = work.spec.name
    todo = [r for r in work.requests if _gen_key(fingerprint, plan.decoding, r) not in cache]
    state.cached[name] = len(work.requests) - len(todo)
    state.generated[name] = 0
    if not todo:
        return
    bar = plan.progress(f"{name}: generate", len(todo)) if plan.progress else None
    t0 = time.monotonic()
    size = plan.decoding.batch_size
    try:
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            outputs = plan.engine.generate(batch, plan.decoding)
            if len(outputs) != len(batch):
                raise RuntimeError(f"engine {plan.engine.name} returned {len(outputs)} generations for {len(batch)} requests")
            cache.extend((_gen_key(fingerprint, plan.decoding, r), g) for r, g in zip(batch, outputs))
            state.generated[name] += len(batch)
            if bar:
                bar.update(len(batch))
    finally:
        state.timing[f"{name}.generate_s"] = round(time.monotonic() - t0, 3)
        if bar:
            bar.close()


@dataclass
class BenchmarkResult:
    info: BenchmarkInfo
    metrics: dict
    counts: dict[str, int]
    rows: list[dict]


def _score(plan: EvalPlan, work: BenchmarkWork, gen_cache, fingerprint: str, state: RunState) -> BenchmarkResult:
    """Verify every sample whose k generations are all available (cached verdicts reused)."""
    spec, k = work.spec, plan.decoding.num_samples
    verifier = verifiers.get(spec.verifier)(**spec.verifier_args, **plan.verifier_options)
    verifier.use_cache_dir(plan.cache_dir)
    verifier_id = cache_key(spec.verifier, verifier.version, spec.verifier_args, plan.verifier_options)[:16]
    vcache = verdicts_cache(plan.cache_dir, f"{spec.verifier}-{verifier_id}")
    ready: list[tuple[Sample, list[tuple[GenerationRequest, Generation]]]] = []
    for i, sample in enumerate(work.samples):
        reqs = work.requests[i * k : (i + 1) * k]
        gens = [gen_cache.get(_gen_key(fingerprint, plan.decoding, r)) for r in reqs]
        if all(g is not None for g in gens):
            ready.append((sample, list(zip(reqs, gens))))

    def vkey(sample: Sample, gen: Generation) -> str:
        return cache_key(verifier_id, work.info["data_sha256"], sample.id, gen.text)

    todo = [(s, g) for s, pairs in ready for _, g in pairs if vkey(s, g) not in vcache]
    t0 = time.monotonic()
    try:
        if todo:
            bar = plan.progress(f"{spec.name}: verify", len(todo)) if plan.progress else None
            chunk = 64
            for start in range(0, len(todo), chunk):
                part = todo[start : start + chunk]
                verdicts = verifier.verify_batch([(s, g.text) for s, g in part])
                vcache.extend((vkey(s, g), v) for (s, g), v in zip(part, verdicts))
                if bar:
                    bar.update(len(part))
            if bar:
                bar.close()
        described = verifier.describe()
    finally:
        verifier.close()
    if described:
        state.isolation[spec.name] = described
    state.timing[f"{spec.name}.verify_s"] = round(time.monotonic() - t0, 3)

    per_sample: list[list[Verdict]] = []
    rows: list[dict] = []
    for sample, pairs in ready:
        verdicts = [vcache.get(vkey(sample, g)) for _, g in pairs]
        per_sample.append(verdicts)
        rows.extend(sample_row(spec.name, sample, req, gen, v) for (req, gen), v in zip(pairs, verdicts))
    metric_values, counts = metric_lib.compute(spec.metrics, per_sample, k)
    counts.update(generated=state.generated.get(spec.name, 0), cached=state.cached.get(spec.name, 0),
                  missing=len(work.samples) - len(ready))
    info = BenchmarkInfo(**work.info, verifier=spec.verifier, verifier_version=verifier.version, verifier_args=spec.verifier_args)
    return BenchmarkResult(info, metric_values, counts, rows)


def sample_row(benchmark: str, sample: Sample, req: GenerationRequest, gen: Generation, v: Verdict) -> dict:
    """One samples.jsonl row (shared by every runner that writes a RunRecord, e.g. the OpenCompass one)."""
    return {
        "benchmark": benchmark, "id": sample.id, "index": req.index,
        "messages": [m.model_dump() for m in req.messages], "reference": sample.reference,
        "completion": gen.text, "answer": v.answer, "passed": v.passed, "score": v.score, "status": v.status,
        "details": v.details, "nfe": gen.nfe, "finish_reason": gen.finish_reason,
    }
