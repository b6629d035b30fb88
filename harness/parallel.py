"""Data-parallel evaluation: ``dare-eval --workers N`` runs N engine replicas as Ray actors.

:class:`ParallelEngine` is an ordinary :class:`~dare.harness.engine.Engine`, so the runner, the cache
and the run record are untouched: each batch the runner hands over is cut into N contiguous shards,
each worker decodes its shard with its own replica (built from the same :class:`EngineContext`
through ``registry.engines``, so this module never imports a backend), and the parent returns the
generations in request order. Requests carry their own seeds and engines are batch-invariant by
contract, so N workers produce the same samples as one. The runner appends every finished batch to
the cache; a worker that dies raises :class:`WorkerDiedError` (one line) and a rerun resumes there.

Placement: one CPU per worker on a CPU machine, one GPU per worker when the device is CUDA.
Ray is imported lazily; without it ``--workers N > 1`` fails with an install hint.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import replace
from typing import Any

from .engine import EngineBase, EngineContext, GenerationRequest
from .errors import DareError, InputError
from .options import DecoderInfo, capabilities
from .records import DecodingConfig, Generation, ModelInfo
from .registry import engines

log = logging.getLogger(__name__)


class WorkerDiedError(DareError):
    """An evaluation worker process died (killed, out of memory, crashed) during generation."""

    exit_code = 1


NEEDS_RAY = "--workers N > 1 needs Ray; install the rl extra (pip install 'dare-dllm[rl]') or run with --workers 1"


def check_workers(workers: int) -> None:
    """What ``dare.plan`` checks of ``--workers`` without starting anything: a count of at least 1 and,
    above 1, Ray installed."""
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    if workers > 1 and importlib.util.find_spec("ray") is None:
        raise InputError(NEEDS_RAY)


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

    def pid(self) -> int:
        return os.getpid()

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.engine, method)(*args)

    def has(self, method: str) -> bool:
        return hasattr(self.engine, method)


class ParallelEngine(EngineBase):
    """N replicas of engine ``engine_name`` behind the Engine protocol (name, version, options, capabilities
    and decoder declarations of the replica)."""

    def __init__(self, engine_name: str, ctx: EngineContext, workers: int):
        check_workers(workers)
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
        use_gpu = _wants_gpu(ctx)
        if not ray.is_initialized():
            # A local cluster sized for the workers; RAY_ADDRESS (set by `ray start` users) attaches instead.
            kwargs: dict[str, Any] = ({} if os.environ.get("RAY_ADDRESS")
                                      else {"num_cpus": max(workers, os.cpu_count() or 1)})
            ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
        threads = 1 if use_gpu else max(1, (os.cpu_count() or 1) // workers)
        replica = ray.remote(_EngineReplica).options(num_cpus=1, num_gpus=1 if use_gpu else 0, max_restarts=0)
        self._actors = [replica.remote(engine_name, ctx, threads) for _ in range(workers)]
        self._pids = self._get([a.pid.remote() for a in self._actors])
        log.info("started %d %s workers (pids %s)", workers, engine_name, self._pids)

    def worker_pids(self) -> list[int]:
        return list(self._pids)

    def _get(self, refs: list) -> list:
        ray = _ray()
        try:
            return ray.get(refs)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as exc:
            dead = (next((i for i, a in enumerate(self._actors) if _is_dead(ray, a)), None)
                    if hasattr(self, "_actors") else None)
            who = f"evaluation worker {dead} of {self.workers}" if dead is not None else "an evaluation worker"
            raise WorkerDiedError(f"{who} died during generation ({type(exc).__name__}); finished batches are "
                                  "cached, rerun the same command to resume") from None
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)  # the engine's own exception, e.g. a one-line DareError
            if isinstance(cause, DareError):
                raise cause from None
            raise

    def model_info(self) -> ModelInfo:
        return self._get([self._actors[0].call.remote("model_info")])[0]

    def decoding_defaults(self) -> dict:
        if not self.capabilities.decoding_defaults:
            return {}
        return self._get([self._actors[0].call.remote("decoding_defaults")])[0]

    def decoder(self, decoding: DecodingConfig) -> DecoderInfo | None:
        return self._get([self._actors[0].call.remote("decoder", decoding)])[0] if self._declares else None

    def token_identity(self) -> dict:
        return self._get([self._actors[0].call.remote("token_identity")])[0] if self._declares else {}

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        self._get([self._actors[0].call.remote("prepare", list(requests), decoding)])  # a streamed sequence: its items

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        """Shard ``requests`` contiguously over the workers and return their generations in order."""
        shards = _contiguous_shards(requests, self.workers)
        refs = [a.call.remote("generate", shard, decoding) for a, shard in zip(self._actors, shards) if shard]
        return [g for part in self._get(refs) for g in part]


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


def _is_dead(ray, actor) -> bool:
    try:
        ray.get(actor.pid.remote(), timeout=5)
        return False
    except Exception:
        return True
