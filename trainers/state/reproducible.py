"""What a training result is a function of, set before the first step and recorded beside the run.

Given the same settings, data and seed, a training run's weights may depend on: the torch thread count
(a reduction split over more threads adds in another order), whether torch's deterministic algorithms
are enforced (GPU kernels with atomics otherwise vary run to run), the vector kernels torch dispatches
to on this CPU (``cpu_capability``), and the versions of torch, Python and the project. :func:`settle` applies
the run's ``threads`` / ``deterministic`` settings and returns those facts; :func:`record` appends them to
``RUN/environment.json``, one entry per (re)start of the run, so a resumed run that changed machine or thread
count says so.

Data order, rollout seeds and estimator noise already depend only on (seed, step) (trainers/training/data.py,
the per-step generators in trainers/training/trainer.py).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch

from dare.harness.rundir import atomic_write, environment_info

log = logging.getLogger(__name__)
ENVIRONMENT_FILE = "environment.json"
#: facts a resumed run is compared on (the versions of the project itself may move between restarts)
EXECUTION = ("torch_threads", "deterministic_algorithms", "torch", "device", "cpu", "cpu_capability", "mkl_cbwr")


def settle(threads: int | None, deterministic: bool, device: str) -> dict[str, Any]:
    """Apply the thread count (None: keep this process's, e.g. from OMP_NUM_THREADS) and the deterministic-
    algorithms switch; return the facts the weights depend on."""
    if threads is not None:
        torch.set_num_threads(threads)
    if deterministic and str(device).startswith("cuda"):
        # cuBLAS reproducibility needs a fixed workspace; it must be set before the first cuBLAS call
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(deterministic)
    return facts(device)


def facts(device: str = "cpu") -> dict[str, Any]:
    """Thread count, deterministic switch, device and versions of this process, as recorded."""
    env = environment_info()
    return {
        "torch_threads": torch.get_num_threads(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "device": str(device),
        "cpu": env.get("cpu"),
        "cpu_capability": env.get("cpu_capability"),
        "mkl_cbwr": env.get("mkl_cbwr"),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "dare_version": env.get("dare_version"),
        "git_commit": env.get("git_commit"),
        "machine": platform.machine(),
    }


def record(run_dir: Path, start_step: int, facts_now: dict[str, Any]) -> list[dict[str, Any]]:
    """Append this (re)start's facts to ``RUN/environment.json``; returns every entry. A resume whose
    :data:`EXECUTION` facts differ from the run's start is logged: its weights need not match an
    uninterrupted run's."""
    file = run_dir / ENVIRONMENT_FILE
    entries = json.loads(file.read_text()) if file.is_file() else []
    entries = [e for e in entries if e.get("from_step", 0) < start_step]  # steps after a checkpoint are redone
    if entries:
        first = entries[0]
        changed = [k for k in EXECUTION if first.get(k) != facts_now.get(k)]
        if changed:
            log.warning("%s resumes at step %d with other %s than it started with (%s); its weights may differ "
                        "from an uninterrupted run's", run_dir, start_step, ", ".join(changed),
                        ", ".join(f"{k}={first.get(k)}->{facts_now.get(k)}" for k in changed))
    entries.append({"from_step": start_step, **facts_now})
    atomic_write(file, json.dumps(entries, indent=2, sort_keys=True) + "\n")
    return entries
