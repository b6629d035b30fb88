"""A pool whose replicas cannot all start (the cluster's CPUs are held by another job) stops in one line that says
how many started and what Ray sees of the cluster, and leaves no CPU held by the replicas that did start."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("ray")

from dare.harness import worker_pool  # noqa: E402
from dare.harness.oom import MemoryReport  # noqa: E402
from dare.harness.worker_pool import WorkerDiedError, WorkerPool  # noqa: E402


class Replica:
    def ready(self) -> MemoryReport:
        return MemoryReport.now()


class Squatter:
    """Another job's actor: holds its CPUs for as long as it lives."""

    def ready(self) -> bool:
        return True


def _free_cpus(ray, expected: float) -> float:
    deadline = time.monotonic() + 20  # a killed actor's CPU comes back once Ray has seen its process end
    while ray.available_resources().get("CPU", 0) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return ray.available_resources().get("CPU", 0)


@pytest.mark.parametrize(("held", "message"), [
    (1, r"^only 1 of 2 evaluation workers started; the others did not within 3 s "
        r"\(Ray sees 1 of 1 nodes alive, 0 of 2 CPUs free\); finished batches are cached"),
    (2, r"^no evaluation worker of 2 was up and none started within 3 s "
        r"\(Ray sees 1 of 1 nodes alive, 0 of 2 CPUs free\); finished batches are cached"),
])
def test_replicas_that_cannot_start_are_named_with_the_cluster_and_free_their_cpus(ray_cluster, monkeypatch,
                                                                                   held, message):
    ray = ray_cluster
    monkeypatch.setattr(worker_pool, "START_TIMEOUT_S", 3.0)
    squatter = ray.remote(Squatter).options(num_cpus=held).remote()
    assert ray.get(squatter.ready.remote())
    replica = ray.remote(Replica).options(num_cpus=1, max_restarts=0)
    made = []  # every handle kept, so only the pool's own kill (not Ray's collection of the handles) frees a CPU

    def new_actor():
        made.append(replica.remote())
        return made[-1]

    try:
        with pytest.raises(WorkerDiedError, match=message):
            WorkerPool(new_actor, 2, restart_budget=3)
        assert _free_cpus(ray, 2 - held) == 2 - held  # the one that started was ended with the pool
    finally:
        ray.kill(squatter, no_restart=True)
    assert _free_cpus(ray, 2) == 2
