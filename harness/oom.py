"""Was a dead worker killed for memory, and how much did it hold? Facts a Ray worker reports to its driver.

A Ray actor's exit status belongs to its raylet, so the driver never sees the SIGKILL the kernel's OOM killer
sends. The kernel does count its kills in the memory cgroup the process ran in (cgroup v2 ``memory.events``,
v1 ``memory.oom_control``: ``oom_kill N``), which is how container runtimes report "OOMKilled". So every worker
answer carries a :class:`MemoryReport` (host, pid, peak resident memory, its cgroup's counter file and count),
and when a worker dies the driver reads that counter again: a count that rose names the death out of memory,
with the memory the worker held when it last answered. A worker on another host, or a cgroup the driver cannot
read, gives the generic line with the memory only.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def high_water_kib() -> int:
    """This process's peak resident memory in KiB (``VmHWM``), 0 where /proc does not say."""
    try:
        with open("/proc/self/status") as stream:
            return next((int(line.split()[1]) for line in stream if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


def oom_counter() -> str | None:
    """The file counting OOM kills in this process's memory cgroup, where it can be read."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2: one unified hierarchy
            candidate = CGROUP_ROOT / path.lstrip("/") / "memory.events"
        elif "memory" in controllers.split(","):
            candidate = CGROUP_ROOT / "memory" / path.lstrip("/") / "memory.oom_control"
        else:
            continue
        if oom_kills(str(candidate)) is not None:
            return str(candidate)
    return None


def oom_kills(counter: str | None) -> int | None:
    """The ``oom_kill`` count in ``counter`` (a memory.events or memory.oom_control file), None if unreadable."""
    if counter is None:
        return None
    try:
        for line in Path(counter).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class MemoryReport:
    """What a worker says of itself with each answer."""

    host: str
    pid: int
    peak_kib: int
    counter: str | None
    kills: int | None

    @classmethod
    def now(cls) -> MemoryReport:
        counter = oom_counter()
        return cls(socket.gethostname(), os.getpid(), high_water_kib(), counter, oom_kills(counter))


def death_cause(last: MemoryReport | None, error: BaseException) -> str:
    """How a worker whose last report was ``last`` died, for a one-line message: out of memory when its cgroup's
    OOM-kill count rose since (read here, on the worker's host), else the error Ray gave."""
    what = type(error).__name__
    if last is None:
        return f"died ({what}) before it first answered"
    held = f"holding at least {last.peak_kib / 1024:.0f} MiB when it last answered"
    now = oom_kills(last.counter) if last.host == socket.gethostname() else None
    if now is not None and last.kills is not None and now > last.kills:
        return (f"was killed out of memory by the kernel's OOM killer (its cgroup's oom_kill count rose from "
                f"{last.kills} to {now}), {held} (give the workers more memory, or run fewer)")
    return f"died ({what}), {held}"
