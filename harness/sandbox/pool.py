"""The worker pool: a fixed number of slots, each with its own uid, running one sandboxed child at a time.

Threads in the parent only wait on pipes; all execution happens in the children. A slot is held for the
whole life of a child, so the per-slot uid (and with it RLIMIT_NPROC) is never shared by two children.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import queue
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import SandboxError
from .codec import CodecError, loads
from .isolation import Isolation, Limits, child_argv, detect
from .launcher import ChildResult, run_child
from .warm import WarmServer

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
NO_ISOLATION_FIX = ("no code-execution isolation is available here: install bubblewrap (apt-get install bubblewrap) "
                    "or util-linux's unshare, or pass unsafe_local_exec=True to run generated code unisolated")


def default_workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(32, cores))


@dataclasses.dataclass
class JobOutcome:
    """Parsed result records (plain JSON dicts, values still in wire form) and how the child ended."""

    records: list[dict]
    child: ChildResult
    protocol_error: str | None = None


class Sandbox:
    """Runs jobs of ``child_runner.py`` in isolated children over a pool of ``workers`` slots.

    ``isolation`` overrides detection (tests use it to exercise the no-namespace path for real)."""

    def __init__(self, workers: int | None = None, limits: Limits | None = None, unsafe_local_exec: bool = False,
                 uid_base: int = 61000, isolation: Isolation | None = None, warm: bool = True):
        self.limits = limits or Limits()
        self.workers = workers or default_workers()
        self.unsafe_local_exec = unsafe_local_exec
        self.isolation: Isolation = isolation or detect(uid_base)
        if self.isolation.backend == "none":
            if not unsafe_local_exec:
                raise SandboxError(NO_ISOLATION_FIX)
            log.warning("running generated code WITHOUT namespace isolation (unsafe_local_exec=True)")
        # Warm servers wipe /tmp and kill(-1) their uid: only inside bwrap's own /tmp and pid namespace.
        self.warm = warm and self.isolation.backend == "bwrap"
        self._servers: dict[int, WarmServer] = {}
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(self.workers):
            self._slots.put(slot)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="dare-sandbox")

    def describe(self) -> dict[str, Any]:
        described = self.isolation.describe(self.limits, self.workers, self.unsafe_local_exec)
        described["warm_servers"] = self.warm
        if self.warm:
            described["layers"].append("warm sandbox per slot: a fresh fork per sample; leftovers killed, /tmp wiped")
        else:
            described["layers"].append("a new sandbox per sample")
        return described

    def run_job(self, job: dict, deadline_s: float, on_record: Callable[[dict], bool] | None = None) -> JobOutcome:
        """Run one job; ``on_record`` sees each parsed record and returns False to stop the child early."""
        records: list[dict] = []
        problems: list[str] = []

        def on_line(line: bytes) -> bool:
            try:
                record = loads(line)
            except CodecError as exc:
                problems.append(str(exc))
                return False
            if type(record) is not dict:
                problems.append("result record is not an object")
                return False
            records.append(record)
            return on_record(record) if on_record else True

        payload = json.dumps(job, separators=(",", ":"), allow_nan=False).encode()
        slot = self._slots.get()
        try:
            argv = child_argv(self.isolation, self.limits, slot)
            if self.warm:
                server = self._servers.setdefault(slot, WarmServer(argv, self.limits.stdout_cap, self.limits.stderr_cap))
                child = server.run(job, deadline_s, on_line)
                if child.returncode is None and not records and not child.timed_out and not problems:
                    child = server.run(job, deadline_s, on_line)  # the server died before the job began: once more
            elif self.isolation.backend == "bwrap":
                child = run_child(argv, payload, deadline_s, on_line, self.limits.stdout_cap, self.limits.stderr_cap)
            else:
                with tempfile.TemporaryDirectory(prefix="dare-sbx-") as workdir:
                    os.chmod(workdir, 0o777)
                    child = run_child(argv, payload, deadline_s, on_line, self.limits.stdout_cap,
                                      self.limits.stderr_cap, cwd=workdir)
        finally:
            self._slots.put(slot)
        if child.stdout_truncated:
            problems.append("result channel exceeded its byte cap")
        return JobOutcome(records, child, "; ".join(problems) or None)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[fn(x) for x in items]`` across the pool's threads, in order."""
        return list(self._executor.map(fn, items))

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for server in self._servers.values():
            server.stop()
        self._servers.clear()
