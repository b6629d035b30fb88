"""The evaluation loop: samples -> cached generations -> verdicts -> metrics -> run directory.

For each benchmark of the suite: read the shipped samples, render prompts, ask the engine for the
generations the cache lacks (in batches, each appended to the cache before the next starts), verify
(verdicts cached by verifier version), aggregate. A generated benchmark is taken in bounded slices from its
data file to the record (harness/slices.py, generate_run.py), so memory does not grow with its size. The run
directory gets ``samples.jsonl`` (written row by row as each benchmark is scored, renamed into place) and
then ``run.json``, both atomically; an interrupted run still writes a ``partial`` record of what finished,
and a rerun resumes from the cache with the same final result.

How a benchmark's missing generations are produced and its generations verified are the two steps of
:class:`RunSteps`; an engine that needs another path (``capabilities.own_steps``: OpenCompass runs its own
inference and evaluation tasks) brings its steps, and this loop keeps the rest: the run-directory lock,
both caches, resume, the record.
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
from . import stopping
from .cache import cache_key, generations_cache
from .engine import Engine, EngineBase, EngineContext, GenerationRequest, declared_token_identity, generate
from .errors import DiskFullError
from .generate_run import GENERATE_TASK, BenchmarkResult, benchmark_info, sample_row  # noqa: F401  (re-exported)
from .options import DecoderInfo, Options, capabilities
from .parallel import DEFAULT_WORKER_RESTARTS, ParallelEngine
from .records import (
    BenchmarkInfo,
    ComponentInfo,
    DecodingConfig,
    Generation,
    ModelInfo,
    RunRecord,
    Sample,
    TrainingLink,
    Verdict,
)
from .registry import tasks
from .rundir import RowsWriter, environment, hold_outputs, new_run_dir, write_record
from .slices import BenchmarkWork, plan_benchmark  # noqa: F401  (re-exported: OpenCompass's steps read them)
from .verifiers import verifiers
from .verifiers.base import verifier_options

log = logging.getLogger(__name__)
Progress = Callable[[str, int], Any]  # (description, total) -> object with update(n) and close()
SAMPLES = RunRecord.model_fields["samples_path"].default


@dataclass
class EvalPlan:
    """Everything resolved before the first generation (built by :func:`dare.harness.plan.plan`).

    ``verifier_options``: per benchmark, its verifier's full options; ``decoder``: what the engine declared for this
    DecodingConfig (None: nothing declared); ``decoding_fields``: the DecodingConfig fields recorded (None: all).
    """

    suite: cfg.SuiteSpec
    decoding: DecodingConfig
    engine: Engine
    model_name: str
    out_dir: Path
    cache_dir: Path
    limit: int | None = None
    verifier_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    progress: Progress | None = None
    decoder: DecoderInfo | None = None
    decoder_options: Options | None = None
    decoding_fields: list[str] | None = None
    training: TrainingLink | dict[str, Any] | None = None
    workers: int = 1
    """Engine replicas: more than one start as Ray actors in :func:`dare.harness.plan.evaluate`."""
    worker_restarts: int = DEFAULT_WORKER_RESTARTS
    """Dead replicas the run replaces before it stops (``--worker-restarts``; execution only)."""
    engine_name: str | None = None
    """The engine's registry name, and the context it was built from (the replicas are built from the same)."""
    engine_context: EngineContext | None = None
    run_dir: Path | None = None
    """Set by :func:`run_eval` once the directory exists (so an interrupted caller can name it)."""
    choices: dict[str, Any] = field(default_factory=dict)
    """Per choice benchmark: its few-shot count and estimator (:class:`~dare.harness.choice_run.ChoicePlan`)."""

    def verifier_options_for(self, benchmark: str) -> dict[str, Any]:
        """The benchmark's verifier options as resolved by the plan (its spec's arguments, defaults filled)."""
        if benchmark in self.verifier_options:
            return self.verifier_options[benchmark]
        spec = cfg.benchmark(benchmark)
        return verifier_options(verifiers.get(spec.verifier), spec.verifier_args)

    def engine_identity(self) -> dict[str, Any]:
        """The engine settings that can change tokens (empty for engines that declare none)."""
        return declared_token_identity(self.engine)

    def generation_key(self) -> str:
        """DecodingConfig hash, plus the hash of the engine identity and the decoder's bound options (e.g.
        PC-Sampler's table sha256) when there are any: the generation cache's key."""
        identity = self.engine_identity()
        bound = self.decoder_options.bound_identity() if self.decoder_options is not None else {}
        if bound:
            identity = {**identity, "decoder_bound": bound}
        return self.decoding.config_hash() + (f"-{cache_key(identity)[:8]}" if identity else "")

    def model_info(self) -> ModelInfo:
        info = self.engine.model_info()
        if self.training is None:
            return info
        return info.model_copy(update={"training": TrainingLink.model_validate(self.training)})


def run_eval(plan: EvalPlan) -> Path:
    """Run the plan and return the run directory (created before the first generation). The output and
    cache directories belong to this process until it returns (a second dare-eval on them exits 2)."""
    with hold_outputs(plan.out_dir, plan.cache_dir):
        return _run_eval(plan)


def _run_eval(plan: EvalPlan) -> Path:
    created = datetime.now(timezone.utc)
    # each benchmark's task type (registry.tasks: generate and verify, or score choices) plans, runs and scores it
    kinds = [tasks.get(cfg.benchmark(b).task) for b in plan.suite.benchmarks]
    works = [kind.plan(plan, cfg.benchmark(b)) for kind, b in zip(kinds, plan.suite.benchmarks)]
    for kind, work in zip(kinds, works):  # refuse bad input before any compute is spent
        kind.prepare(plan, work)
    run_dir = plan.run_dir = new_run_dir(plan.out_dir, plan.suite.name, plan.model_name, plan.decoding.config_hash(),
                                         created)
    model_info = plan.model_info()
    store = GenerationStore(generations_cache(plan.cache_dir, model_info.fingerprint, plan.generation_key()),
                            model_info.fingerprint, plan.generation_key())
    steps = plan.engine.run_steps(plan) if capabilities(plan.engine).own_steps else RunSteps()
    state = RunState(fingerprint=model_info.fingerprint)
    started = time.monotonic()

    def record(status: str, verify: bool) -> str:
        # samples.jsonl first (row by row as each benchmark is scored, renamed into place), then run.json
        with RowsWriter(run_dir / SAMPLES) as rows:
            results = {}
            for kind, w in zip(kinds, works):
                results[w.spec.name] = result = kind.score(plan, w, steps, store, state, verify, rows.write)
                for row in result.rows:  # rows a task type returns rather than writes
                    rows.write(row)
            if any(r.counts["missing"] for r in results.values()) and stopping.requested():
                status = "partial"  # a stop during verification leaves the rest unverified
            state.timing["total_s"] = round(time.monotonic() - started, 3)
            written = build_record(plan, run_dir, status, created, {n: r.info for n, r in results.items()},
                                   model_info, {n: r.metrics for n, r in results.items()},
                                   {n: r.counts for n, r in results.items()}, state.isolation, state.timing,
                                   backend=steps.backend)
            rows.commit()
        write_record(run_dir, written)
        return status

    try:
        for kind, work in zip(kinds, works):
            kind.run(plan, work, steps, store, state)
    except BaseException as exc:
        # Also on interruption: whatever finished is recorded, marked partial. After a stop, finished
        # generations are verified in the first half of the grace period only; after a second signal or on a
        # full disk, not at all (the rerun verifies them).
        try:
            record("partial", verify=not isinstance(exc, (DiskFullError, stopping.Interrupted)))
        except DiskFullError as full:
            log.info("no partial record written: %s", full)  # the first failure is the one to report
        raise
    if record("complete", verify=True) == "partial":
        stopping.safe_point()
    return run_dir


def build_record(plan: EvalPlan, run_dir: Path, status: str, created: datetime, benchmarks: dict[str, BenchmarkInfo],
                 model: ModelInfo, metrics: dict, counts: dict, isolation: dict, timing: dict,
                 backend: ComponentInfo | None = None) -> RunRecord:
    """The one place a RunRecord is built: engine (or ``backend``, what an engine's own steps record
    instead, e.g. OpenCompass), decoder and verifiers as (name, version, options), the engine identity, the
    decoding used, and the Ray workers' count and restarts when there were workers."""
    options = plan.engine.options if isinstance(plan.engine, EngineBase) else {}
    engine = backend or ComponentInfo(name=plan.engine.name, version=plan.engine.version,
                                      options=(options.model_dump(mode="json") if isinstance(options, Options)
                                               else dict(options)))
    decoder = (plan.decoder.component(plan.decoder_options) if plan.decoder and plan.decoder_options is not None
               else None)
    return RunRecord(
        run_id=run_dir.name, status=status, created_at=created.isoformat(),
        finished_at=datetime.now(timezone.utc).isoformat(), suite=plan.suite.name, benchmarks=benchmarks,
        model=model, backend=engine, decoder=decoder, engine_identity=plan.engine_identity(),
        decoding_fields=plan.decoding_fields, decoding=plan.decoding, metrics=metrics, counts=counts,
        isolation=isolation, flags=[*plan.flags, *stopping.flags()], timing=timing, environment=environment(),
        command=plan.command, execution=plan.engine.execution() if isinstance(plan.engine, ParallelEngine) else None,
    )


@dataclass
class RunState:
    fingerprint: str = ""
    generated: dict[str, int] = field(default_factory=dict)
    cached: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    isolation: dict[str, Any] = field(default_factory=dict)


@dataclass
class GenerationStore:
    """The generation cache under one model fingerprint and generation key: what the steps read and fill."""

    cache: Any
    fingerprint: str
    generation_key: str

    def key(self, req: GenerationRequest) -> str:
        return cache_key(self.fingerprint, self.generation_key, req.prompt_hash, req.index, req.seed)

    def get(self, req: GenerationRequest) -> Generation | None:
        return self.cache.get(self.key(req))

    def __contains__(self, req: GenerationRequest) -> bool:
        return self.key(req) in self.cache

    def put(self, requests: list[GenerationRequest], generations: list[Generation]) -> None:
        """Append one finished batch (fsync'd: a kill loses at most the batch in flight)."""
        self.cache.extend((self.key(r), g) for r, g in zip(requests, generations))


Store = Callable[[list[GenerationRequest], list[Generation]], None]


class RunSteps:
    """The two steps of the loop an engine may replace (``capabilities.own_steps``, ``engine.run_steps(plan)``).

    ``generate`` produces the generations of ``todo`` (the requests the cache lacks) and hands each finished
    batch to ``store`` (which caches it and checks its length); ``verify`` returns the verdicts of a chunk of
    (sample, generation) pairs the verdict cache lacks; ``describe`` the verification facts run.json records
    (sandbox isolation). Both steps may read the cache (``generations``). ``backend``: what run.json records
    as the backend instead of the engine itself (None: the engine).
    """

    backend: ComponentInfo | None = None
    streams: bool = True
    """Whether ``generate`` may be called once per piece of a benchmark's missing requests (whole batches,
    harness/generate_run.py); False: once with them all (steps that run over a whole benchmark)."""

    def generate(self, plan: EvalPlan, work: BenchmarkWork, todo: list[GenerationRequest], store: Store,
                 generations: GenerationStore) -> None:
        """The engine, ``batch_size`` requests at a time."""
        size = plan.decoding.batch_size
        for start in range(0, len(todo), size):
            batch = todo[start : start + size]
            store(batch, generate(plan.engine, batch, plan.decoding, plan.decoder, plan.decoder_options))

    def verify(self, plan: EvalPlan, work: BenchmarkWork, verifier: Any, items: list[tuple[Sample, Generation]],
               generations: GenerationStore) -> list[Verdict]:
        """The benchmark's verifier."""
        return verifier.verify_batch([(s, g.text) for s, g in items])

    def describe(self, work: BenchmarkWork, verifier: Any) -> dict[str, Any]:
        return verifier.describe()
