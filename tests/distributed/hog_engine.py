"""Engine ``hog`` for the out-of-memory test: the torch engine, except that a worker's second ``generate`` call
first touches ``DARE_TEST_HOG_MIB`` MiB (when that is set), so the kernel's OOM killer ends it under a cgroup
limit after the first batch is cached. Ray workers register it through ``worker_process_setup_hook``."""

from __future__ import annotations

import os

from dare.backends.engines.torch import TorchEngine
from dare.harness.registry import engines


class HogEngine(TorchEngine):
    name = "hog"
    calls = 0

    def generate(self, requests, decoding, *args, **kwargs):
        HogEngine.calls += 1
        mib = int(os.environ.get("DARE_TEST_HOG_MIB", "0"))
        if mib and HogEngine.calls == 2:
            held = bytearray(mib << 20)
            held[::4096] = b"x" * len(held[::4096])  # resident, page by page, until the limit is reached
        return super().generate(requests, decoding, *args, **kwargs)


def register() -> None:
    if "hog" not in engines.names():
        engines.register("hog", HogEngine)
