"""A local Ray cluster per test module, always shut down (tests here need the rl extra: ray, verl)."""

from __future__ import annotations

import os
import uuid

import pytest


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    os.environ.pop("RAY_ADDRESS", None)  # never attach to someone else's cluster
    if ray.is_initialized():
        ray.shutdown()
    # The workers inherit these from the raylet, which inherits them from this process: set while it starts, not as a
    # runtime_env, so a worker's start asks Ray's runtime-env agent nothing, as on the cluster dare-eval starts itself.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OMP_NUM_THREADS", "1")
        env.setenv("TOKENIZERS_PARALLELISM", "false")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 namespace=f"dare-test-{uuid.uuid4().hex[:8]}")
    try:
        yield ray
    finally:
        ray.shutdown()
