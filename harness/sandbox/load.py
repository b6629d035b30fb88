"""The machine's load as a wall-clock scale, measured by the trusted parent when a job starts.

A test's limit is on CPU time (load does not stretch it) and, for calls that sleep or block, on wall time.
EvalPlus measures wall time on an unloaded machine; on a loaded one a CPU-bound call's wall time grows with
the competition for cores, so the wall limit is the CPU limit times the stretch a CPU-bound process would
see right now: ``max(1, ceil(tasks / cores))``. ``tasks`` is the kernel's instantaneous count of runnable
tasks (``/proc/loadavg``, field 4), three reads rounded, taken by the parent while it runs, so the reader
counts in place of the job about to start; ``cores`` are the ones this process may run on. The
ceiling, not the mean ``tasks / cores``: the mean share is what a job gets only when the kernel migrates it
evenly, which it does not promise; a scheduler that balances tasks over cores puts at most ``ceil(tasks /
cores)`` of them on the job's core (two busy processes held one per core of two give the job half a core,
a stretch of 2, where the mean reads 1.5 and failed honest code). On an idle machine the scale is 1 and a
2 s sleep on a 1 s limit fails, as in EvalPlus; with two busy processes on two cores the scale is 2.

Where the kernel's count covers more cores than this process may use (a container pinned to a few cores of
a large host) the scale over-estimates: honest code still never fails, sleeping calls are judged more
leniently. Without ``/proc/loadavg`` the one-minute load average stands in.
"""

from __future__ import annotations

import math
import os
import threading

LOADAVG = "/proc/loadavg"
SCALE_RULE = ("wall limit = CPU limit x max(1, ceil(runnable tasks / usable cores)), read by the trusted parent "
              "as each job starts (/proc/loadavg, three reads rounded)")
READS = 3  # averaged and rounded: a task seen in one read of three is short-lived, not a competitor


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def runnable_tasks() -> float:
    """Runnable tasks on the machine now, the reader included."""
    try:
        with open(LOADAVG, "rb") as stream:
            fields = stream.read().split()
        return float(fields[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return os.getloadavg()[0] + 1.0


class LoadGauge:
    """``scale()``: the wall-clock scale for a job starting now; every reading is kept for the run record."""

    def __init__(self) -> None:
        self.cores = usable_cores()
        self._lock = threading.Lock()
        self.readings: list[float] = []

    def scale(self) -> float:
        tasks = round(sum(runnable_tasks() for _ in range(READS)) / READS)
        value = float(max(1, math.ceil(tasks / self.cores)))
        with self._lock:
            self.readings.append(value)
        return value

    def summary(self) -> dict:
        """What run.json records: how the wall limits were scaled over the run."""
        with self._lock:
            readings = list(self.readings)
        stats = {"jobs": len(readings)}
        if readings:
            stats.update(mean=round(sum(readings) / len(readings), 3), max=max(readings),
                         scaled_jobs=sum(r > 1.0 for r in readings))
        return {"rule": SCALE_RULE, "usable_cores": self.cores, "load_scale": stats}
