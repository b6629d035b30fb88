"""Data-parallel evaluation: ``dare-eval --workers N`` runs N engine replicas as Ray actors.

:class:`ParallelEngine` is an ordinary :class:`~dare.harness.engine.Engine`, so the runner, the cache
and the run record are untouched: each batch the runner hands over is cut into one contiguous shard per
live worker, each worker decodes its shard with its own replica (built from the same :class:`EngineContext`
through ``registry.engines``, so this module never imports a backend), and the parent returns the
generations in request order. Requests carry their own seeds and engines are batch-invariant by
contract, so N workers produce the same samples as one.

A worker that dies is replaced (:class:`~dare.harness.worker_pool.WorkerPool`): its shard runs again on the
next free replica, which gives the same generations, and the runner caches the batch once, as ever. Up to
``--worker-restarts`` replacements per run (default :data:`DEFAULT_WORKER_RESTARTS`, recorded with the count
used under run.json's ``execution``; neither is in the config hash or a cache key); one more death raises
:class:`WorkerDiedError` (one line, exit 1), and a rerun resumes from the batches already cached.

Placement: one CPU per worker on a CPU machine, one GPU per worker when the device is CUDA.
Ray is imported lazily; without it ``--workers N > 1`` fails with an install hint.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import replace
from typing import Any

from . import stopping
from .engine import EngineBase, EngineContext, GenerationRequest
from .errors import InputError
from .oom import MemoryReport
from .options import DecoderInfo, capabilities
from .records import DecodingConfig, Execution, Generation, ModelInfo
from .registry import engines
from .worker_pool import WorkerDiedError, WorkerPool

__all__ = ["DEFAULT_WORKER_RESTARTS", "ParallelEngine", "WorkerDiedError", "check_worker_restarts", "check_workers"]

log = logging.getLogger(__name__)

DEFAULT_WORKER_RESTARTS = 3
"""Dead workers a run replaces before it stops: enough for a preempted node or two, few enough that a
request that kills every replica it lands on (out of memory on one long prompt) stops the run quickly."""

NEEDS_RAY = "--workers N > 1 needs Ray; install the rl extra (pip install 'dare-dllm[rl]') or run with --workers 1"


def check_workers(workers: int) -> None:
    """What ``dare.plan`` checks of ``--workers`` without starting anything: a count of at least 1 and,
    above 1, Ray installed."""
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    if workers > 1 and importlib.util.find_spec("ray") is None:
        raise InputError(NEEDS_RAY)


def check_worker_restarts(restarts: Any) -> None:
    """``--worker-restarts``: a whole number of at least 0 (0: the first death stops the run)."""
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise InputError(f"--worker-restarts must be a whole number of at least 0, got {restarts!r}")


def _ray():
    try:
        import ray
    except ImportError as exc:
        raise InputError(NEEDS_RAY) from exc
    return ray


class _EngineReplica:
    """Body of one Ray actor: a full engine replica (wrapped by ``ray.remote`` at start-up)."""

    def __init__(self, engine_name: str, ctx: EngineContext, threads: int):
        try:  # N replicas on one machine: split the cores instead of oversubscribing them
            import torch

            torch.set_num_threads(threads)
        except ImportError:
            pass
        self.engine = engines.get(engine_name)(ctx)

    def ready(self, *warm_up: Any) -> MemoryReport:
        """This worker's pid and memory, once ``warm_up`` (a method and its arguments: the run's ``prepare``)
        has run, if any."""
        if warm_up:
            self.call(*warm_up)
        return MemoryReport.now()

    def call(self, method: str, *args: Any) -> tuple[Any, MemoryReport]:
        """The engine's answer, and the memory this worker holds after it (named if it later dies)."""
        return getattr(self.engine, method)(*args), MemoryReport.now()


class ParallelEngine(EngineBase):
    """N replicas of engine ``engine_name`` behind the Engine protocol (name, version, options, capabilities
    and decoder declarations of the replica); up to ``restart_budget`` dead replicas are replaced."""

    def __init__(self, engine_name: str, ctx: EngineContext, workers: int,
                 restart_budget: int = DEFAULT_WORKER_RESTARTS):
        check_workers(workers)
        check_worker_restarts(restart_budget)
        ray = _ray()
        engine_cls = engines.get(engine_name)
        super().__init__(ctx)
        self.name, self.version = engine_cls.name, engine_cls.version
        # the replica's declarations, but generate() passes the DecodingConfig on (each replica resolves the
        # same decoder and options from it), not the driver's resolved objects
        self.capabilities = replace(capabilities(engine_cls), typed_decoding=False)
        self._declares = isinstance(engine_cls, type) and issubclass(engine_cls, EngineBase)
        if self._declares:
            self.Options = engine_cls.Options
        self.workers = workers
        self._answers: dict[str, Any] = {}
        use_gpu = _wants_gpu(ctx)
        if not ray.is_initialized():
            # A local cluster sized for the workers; RAY_ADDRESS (set by `ray start` users) attaches instead.
            kwargs: dict[str, Any] = ({} if os.environ.get("RAY_ADDRESS")
                                      else {"num_cpus": max(workers, os.cpu_count() or 1)})
            ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
            stopping.reclaim()  # Ray's SIGTERM handler would abort the run instead of stopping it at a safe point
        threads = 1 if use_gpu else max(1, (os.cpu_count() or 1) // workers)
        # Ray's own restarts (max_restarts) are off: the pool replaces a dead replica itself, so it can count
        # the restarts against one budget for the run and hand the lost shard to whichever replica is free.
        replica = ray.remote(_EngineReplica).options(num_cpus=1, num_gpus=1 if use_gpu else 0, max_restarts=0)
        self._pool = WorkerPool(lambda: replica.remote(engine_name, ctx, threads), workers, restart_budget)
        log.info("started %d %s workers (pids %s)", workers, engine_name, self._pool.pids())

    def worker_pids(self) -> list[int]:
        """The pids of the workers that are up (a replacement still starting is not listed)."""
        return self._pool.pids()

    def execution(self) -> Execution:
        """What run.json records of how the run was executed (outside the config hash and the cache keys)."""
        return Execution(workers=self.workers, worker_restart_budget=self._pool.restart_budget,
                         worker_restarts=self._pool.restarts)

    def close(self) -> None:
        """End the workers (the run is over: their CPUs or GPUs are free for the next one at once)."""
        self._pool.close()

    def _ask(self, method: str, *args: Any) -> Any:
        return self._pool.run([(method, args)])[0]

    def _remembered(self, method: str) -> Any:
        # the same answer from every replica; kept, so writing the record never needs a live worker
        if method not in self._answers:
            self._answers[method] = self._ask(method)
        return self._answers[method]

    def model_info(self) -> ModelInfo:
        return self._remembered("model_info")

    def decoding_defaults(self) -> dict:
        return self._remembered("decoding_defaults") if self.capabilities.decoding_defaults else {}

    def decoder(self, decoding: DecodingConfig) -> DecoderInfo | None:
        return self._ask("decoder", decoding) if self._declares else None

    def token_identity(self) -> dict:
        return self._remembered("token_identity") if self._declares else {}

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        """Every live replica checks the requests at once, so each loads its model now rather than in its
        first shard, where the whole batch would wait for the slowest."""
        requests = list(requests)  # a streamed sequence: its items travel to the workers
        self._pool.run([("prepare", (requests, decoding))] * max(1, self._pool.live()))
        self._pool.warm_up = ("prepare", requests, decoding)  # a replacement does the same before it takes work

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        """Shard ``requests`` contiguously over the live workers and return their generations in order."""
        shards = [s for s in _contiguous_shards(requests, max(1, self._pool.live())) if s]
        parts = self._pool.run([("generate", (shard, decoding)) for shard in shards])
        return [g for part in parts for g in part]


def _contiguous_shards(items: list, n: int) -> list[list]:
    """``n`` contiguous slices whose sizes differ by at most one (empty slices when ``len < n``)."""
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _wants_gpu(ctx: EngineContext) -> bool:
    if ctx.device is not None:
        return ctx.device.startswith("cuda")
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()

