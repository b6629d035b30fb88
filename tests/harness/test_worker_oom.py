"""A verifier worker that runs out of memory is named as such, with the memory it held, not as a generic
crash: killed by SIGKILL after it grew (what the kernel's OOM killer does), or stopped by its RLIMIT_AS cap."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from dare.harness.verifiers.worker_pool import DeadlinePool, high_water_kib

ROOT = Path(__file__).resolve().parents[2]

GROWN_MIB = 200


def grow_then_killed(mib: int) -> None:
    """In the worker: touch ``mib`` MiB, then get SIGKILLed as the OOM killer would kill it."""
    held = bytearray(mib << 20)
    held[:: 4096] = b"x" * len(held[:: 4096])  # resident, not only reserved
    os.kill(os.getpid(), signal.SIGKILL)


def allocate(mib: int) -> int:
    return len(bytearray(mib << 20))


def test_a_worker_killed_after_it_grew_is_named_out_of_memory_with_its_peak():
    """The pool runs in a small fresh interpreter: a worker's high-water mark starts at its parent's, so only
    there does its own 200 MiB show above it (under a large parent the message says "at most")."""
    code = ("from dare.harness.verifiers.worker_pool import DeadlinePool\n"
            f"pool = DeadlinePool('{__name__}:grow_then_killed', workers=1, timeout=60, memory_mb=None)\n"
            f"print(pool.map([({GROWN_MIB},)])[0].error)\npool.close()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    error = done.stdout.strip()
    assert error.startswith("worker killed by SIGKILL holding ") and "out of memory" in error, done.stderr[-500:]
    peak = int(re.search(r"holding (\d+) MiB at its peak", error).group(1))
    assert GROWN_MIB <= peak < GROWN_MIB + 400, error  # the interpreter's own memory comes on top


def test_under_a_larger_parent_the_peak_is_only_a_bound():
    pool = DeadlinePool(f"{__name__}:grow_then_killed", workers=1, timeout=60, memory_mb=None)
    pool_parent_peak = high_water_kib()
    try:
        (result,) = pool.map([(1,)])  # 1 MiB: far under this test process's own peak
    finally:
        pool.close()
    assert result.crashed and "out of memory" in result.error
    assert "at most" in result.error and pool_parent_peak > 0


def test_a_job_over_the_address_space_cap_is_named_and_the_worker_stays():
    pool = DeadlinePool(f"{__name__}:allocate", workers=1, timeout=60, memory_mb=300)
    try:
        over, fine = pool.map([(1024,), (10,)])
    finally:
        pool.close()
    assert not over.ok and not over.crashed
    assert over.error == "out of memory: the job reached the worker's cap of 300 MiB (memory_mb, address space)"
    assert fine.ok and fine.value == 10 << 20 and pool.replaced == 0
