"""Ray cluster and verl worker-group start-up for the bridge.

One resource pool ``[gpus_per_node] * nnodes`` with ``max_colocate_count=1`` (one fused worker per
device; the verl default of 10 asks for 10 CPUs per bundle and never schedules on a small CPU box).
On a CPU machine the pool is ``[workers]`` CPU bundles on a local cluster.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass

from dare.harness import stopping
from dare.harness.errors import ConfigError, PrerequisiteError

log = logging.getLogger(__name__)
_ENV = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True)
class Placement:
    """Where the workers go: ``nnodes`` x ``per_node`` processes, one device each."""

    nnodes: int = 1
    per_node: int = 2
    device: str = "cpu"

    @property
    def world_size(self) -> int:
        return self.nnodes * self.per_node


def ensure_ray(placement: Placement):
    """Attach to a running cluster (``RAY_ADDRESS`` / multi-node) or start a local one sized for the pool."""
    for module in ("ray", "verl"):  # both before Ray starts: a missing verl would otherwise surface later
        try:
            __import__(module)
        except ImportError as exc:
            raise PrerequisiteError(f"--engine verl needs {module} (the rl extra, in its own venv): python3 -m venv "
                                    ".venv-rl && .venv-rl/bin/pip install -c constraints-cpu.txt -e \".[dev,rl]\", "
                                    "then run .venv-rl/bin/dare-train") from exc
    import ray

    if ray.is_initialized():
        return ray
    runtime_env = {"env_vars": dict(_ENV)}
    if os.environ.get("RAY_ADDRESS") or placement.nnodes > 1:
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), runtime_env=runtime_env, log_to_driver=True)
    else:
        cpus = max(placement.world_size, os.cpu_count() or 1)
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    stopping.reclaim()  # Ray's SIGTERM handler would abort the run instead of stopping it at a safe point
    return ray


def start_worker_group(placement: Placement, worker_kwargs: dict):
    """A verl ``RayWorkerGroup`` of :class:`~.worker.DareWorker`, one process per device."""
    ray = ensure_ray(placement)
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup

    from .worker import DareWorker

    need = "GPU" if placement.device == "cuda" else "CPU"
    have = ray.cluster_resources().get(need, 0)
    if have < placement.world_size:  # verl waits on placement groups without a timeout: refuse early
        raise ConfigError(f"the Ray cluster has {have:g} {need}s but --nnodes x --gpus-per-node asks for "
                          f"{placement.world_size}; start more nodes (ray start) or ask for fewer workers")
    pool = RayResourcePool([placement.per_node] * placement.nnodes, use_gpu=placement.device == "cuda",
                           max_colocate_count=1, name_prefix=f"dare{uuid.uuid4().hex[:8]}")
    cls = RayClassWithInitArgs(cls=ray.remote(DareWorker), **worker_kwargs)
    group = RayWorkerGroup(pool, cls, device_name=placement.device)
    group.dare_resource_pool = pool  # released by stop_worker_group
    log.info("verl worker group: %d workers on %s", group.world_size, placement.device)
    return group


def stop_worker_group(group) -> None:
    """Kill the group's actors and remove its placement groups (the Ray session may host more groups)."""
    import ray
    from ray.util import remove_placement_group

    for handle in getattr(group, "workers", []):
        try:
            ray.kill(handle)
        except Exception:  # already dead
            pass
    if stopping.requested():
        # the run exits next: Ray removes a job's placement groups with its driver, and a scheduler's SIGTERM to
        # the whole job may have stopped the GCS that remove_placement_group would wait on for good
        return
    for pg in getattr(getattr(group, "dare_resource_pool", None), "pgs", None) or []:
        try:
            remove_placement_group(pg)
        except Exception:
            pass
