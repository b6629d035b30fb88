"""A dead verl training worker costs the steps since the last checkpoint, not the run.

A verl worker group is one FSDP world: when one rank dies (SIGKILL, the OOM killer, its node lost) the others
hold shards nobody can complete, and their collectives with the dead rank fail. So the whole group is
replaced: its actors are killed and its placement groups removed, a new group starts from the run's last
checkpoint (weights and AdamW moments; the base model before the first checkpoint), and the driver rewinds its
learning-rate schedule and metrics log to that step (:meth:`VerlTrainer.train`, `_rewind`). Data order, rollout
seeds and estimator noise depend only on (seed, step), so the steps run again are those an uninterrupted run
takes, and the run ends with its weights and metrics.

Replacements are counted against ``TrainConfig.worker_restarts`` (``--worker-restarts``; execution only, outside
the fingerprint); each is one line of ``RUN/worker_restarts.jsonl``. One more death than the budget allows
raises :class:`WorkerDiedError` (exit 1); the rerun resumes from the last checkpoint as after any kill.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dare.harness.diskfull import append_all
from dare.harness.errors import DareError
from dare.harness.oom import MemoryReport, death_cause
from dare.harness.worker_pool import WorkerDiedError, ray_deaths

from ..state import RESUME_TRAINING

RESTARTS_FILE = "worker_restarts.jsonl"
PING_S = 5.0
"""How long a liveness probe waits: a dead actor answers at once, a live one idle after its failed call too."""


def dead_ranks(ray, workers: list) -> list[int]:
    """The ranks of ``workers`` (actor handles) that are dead. A rank whose call failed because a peer died mid-
    collective reports a task error, not a death; the probe tells the two apart."""
    probes = [w.__ray_ready__.remote() for w in workers]
    ready, _ = ray.wait(probes, num_returns=len(probes), timeout=PING_S)
    dead = []
    for rank, ref in enumerate(probes):
        if ref in ready:
            try:
                ray.get(ref)
            except ray_deaths(ray):
                dead.append(rank)
    return dead


def call(group, stage: str, method: str, *args, memory: list[MemoryReport] | None = None) -> Any:
    """``group.method(*args)``; a dead worker becomes :class:`WorkerDiedError` naming ``stage``, the rank and how
    it died (out of memory, from ``memory``: each rank's last :class:`MemoryReport`)."""
    import ray

    try:
        return getattr(group, method)(*args)
    except ray_deaths(ray) as exc:
        error: BaseException = exc
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, DareError):
            raise cause from None
        error = exc
    dead = dead_ranks(ray, list(getattr(group, "workers", [])))
    if not dead and not isinstance(error, ray_deaths(ray)):
        raise error
    rank = dead[0] if dead else None
    last = memory[rank] if memory and rank is not None and rank < len(memory) else None
    who = f"verl training worker {rank}" if rank is not None else "a verl training worker"
    raise WorkerDiedError(f"{who} {death_cause(last, error)} during {stage}") from None


def over_budget(died: WorkerDiedError, used: int, budget: int) -> WorkerDiedError:
    return WorkerDiedError(f"{died.args[0]}; the restart budget is spent ({used} of {budget}, --worker-restarts); "
                           f"{RESUME_TRAINING}")


def record(run_dir: Path, entry: dict[str, Any]) -> None:
    """Append one restart to ``RUN/worker_restarts.jsonl`` (whole lines only, a full disk named)."""
    append_all(run_dir / RESTARTS_FILE, (json.dumps(entry, sort_keys=True) + "\n").encode())


def recorded(run_dir: Path) -> list[dict[str, Any]]:
    file = run_dir / RESTARTS_FILE
    return [json.loads(line) for line in file.read_text().splitlines()] if file.is_file() else []
