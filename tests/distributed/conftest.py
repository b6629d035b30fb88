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
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace=f"dare-test-{uuid.uuid4().hex[:8]}",
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}})
    try:
        yield ray
    finally:
        ray.shutdown()
