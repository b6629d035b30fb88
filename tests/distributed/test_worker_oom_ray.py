"""An evaluation worker the kernel's OOM killer ends is named as such, with the memory it held, and the rerun
resumes: a real OOM kill, in a memory cgroup made for the test (root and cgroup v1 or v2 needed, else skipped).

Each run is a child process that moves itself into the cgroup before it starts Ray, so the raylet and both
workers run under the limit, as in a container. Engine ``hog`` (hog_engine.py) is the torch engine whose worker
touches more memory than the limit in its second batch; Ray's own memory monitor is off, so the kernel acts."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray")

from .test_worker_restarts import once_each, run_dir  # noqa: E402

pytestmark = [pytest.mark.extended, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
LIMIT_MIB, HOG_MIB = 4096, 6144
ARGS = ["--model", "tiny-llada", "--suite", "sudoku", "--limit", "8", "--workers", "2", "--set", "batch_size=2",
        "--engine", "hog", "--no-progress", "--worker-restarts", "0"]
SCRIPT = """
import os, sys
from pathlib import Path
if os.environ.get("DARE_TEST_CGROUP"):
    Path(os.environ["DARE_TEST_CGROUP"], "cgroup.procs").write_text(str(os.getpid()))
import ray
sys.path.insert(0, os.getcwd())
from tests.distributed.hog_engine import register
register()
env = {k: os.environ[k] for k in ("DARE_TEST_HOG_MIB",) if k in os.environ}
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
         runtime_env={"env_vars": {**env, "PYTHONPATH": os.getcwd(), "OMP_NUM_THREADS": "1"},
                      "worker_process_setup_hook": "tests.distributed.hog_engine.register"})
from dare.harness import cli
code = cli.main(sys.argv[1:])
ray.shutdown()
sys.exit(code)
"""


def memory_cgroup(limit_mib: int) -> Path | None:
    """A new memory cgroup limited to ``limit_mib`` (no swap), or None where none can be made here."""
    name, limit = f"dare-oom-{uuid.uuid4().hex[:8]}", str(limit_mib << 20)
    unified = Path("/sys/fs/cgroup/cgroup.controllers")
    if unified.is_file() and "memory" in unified.read_text().split():  # v2: memory.max, memory.swap.max
        path, limits = Path("/sys/fs/cgroup") / name, (("memory.max", limit), ("memory.swap.max", "0"))
    elif Path("/sys/fs/cgroup/memory/memory.limit_in_bytes").is_file():  # v1: memory and memory + swap
        path, limits = (Path("/sys/fs/cgroup/memory") / name,
                        (("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit)))
    else:
        return None
    try:
        path.mkdir()
        for i, (file, value) in enumerate(limits):
            if i == 0 or (path / file).exists():  # the memory limit must take; the swap one where there is swap
                (path / file).write_text(value)
        return path
    except OSError:  # not root, or the memory controller is not enabled for children here
        with contextlib.suppress(OSError):
            path.rmdir()
        return None


def remove_cgroup(path: Path) -> None:
    for _ in range(50):  # Ray's processes may outlive the child by a moment
        pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.2)


def dare_eval(out: Path, cgroup: Path | None, hog_mib: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_memory_monitor_refresh_ms": "0", "OMP_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    if cgroup is not None:
        env["DARE_TEST_CGROUP"] = str(cgroup)
    if hog_mib:
        env["DARE_TEST_HOG_MIB"] = str(hog_mib)
    return subprocess.run([sys.executable, "-c", SCRIPT, *ARGS, "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=400)


def test_an_oom_killed_worker_is_named_and_the_rerun_resumes(tmp_path):
    cgroup = memory_cgroup(LIMIT_MIB)
    if cgroup is None:
        pytest.skip("no memory cgroup can be made here (needs root and cgroup v1 or v2 with memory)")
    try:
        killed = dare_eval(tmp_path / "oom", cgroup, HOG_MIB)
    finally:
        remove_cgroup(cgroup)
    errors = [line for line in killed.stderr.splitlines() if line.startswith("dare-eval: error:")]
    assert killed.returncode == 1 and len(errors) == 1, killed.stderr[-3000:]
    line = errors[0]
    assert "was killed out of memory by the kernel's OOM killer (its cgroup's oom_kill count rose from" in line
    assert "MiB when it last answered" in line and "rerun the same command to resume" in line
    record = json.loads((run_dir(tmp_path / "oom") / "run.json").read_text())
    assert record["status"] == "partial" and record["counts"]["sudoku"]["generated"] == 2  # batch 1 was cached

    resumed = dare_eval(tmp_path / "oom", None, 0)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    undisturbed = dare_eval(tmp_path / "straight", None, 0)
    assert undisturbed.returncode == 0, undisturbed.stderr[-3000:]
    samples = [(run_dir(tmp_path / d) / "samples.jsonl").read_bytes() for d in ("oom", "straight")]
    assert samples[0] == samples[1]
    once_each(tmp_path / "oom")  # the resumed run generated only what the killed one had not cached
