"""How a call's wall-clock limit survives a busy machine: own time in the sandbox, the load for the parent.

A test's limit is on CPU time (load does not stretch it) and, for calls that sleep or block, on wall time, as
EvalPlus measures it on an unloaded machine. On a loaded machine a CPU-bound call's wall time grows by the time
it spends runnable, waiting for a core. The kernel counts that wait per thread (``run_delay``,
``/proc/<pid>/task/<tid>/schedstat``), so the sandbox judges each call's *own time*, the wall clock less that
wait (``step_limits.JobClock.own``, read by the job's steward from outside the candidate's process): on an idle
machine it is the wall clock, and no other process, whether another sample's, another worker's or the machine's,
lengthens or shortens what a call may sleep. The job's own processes count against its CPU limit instead
(``step_limits.JobClock.cpu``), so the waits a candidate causes itself buy it nothing. A verdict then depends on
its own candidate alone.

Where the kernel does not report the wait, the older rule stands: the wall limit is the CPU limit times the
stretch a CPU-bound process would see when the job starts, ``max(1, ceil(tasks / cores))``. ``tasks`` is the
kernel's instantaneous count of runnable tasks (``/proc/loadavg``, field 4), three reads rounded; ``cores``
are the ones this process may run on. The ceiling, not the mean: a scheduler that balances tasks over cores
puts at most ``ceil(tasks / cores)`` of them on the job's core.

The parent's own deadlines, which end a job from outside whatever the candidate does with the sandbox's clocks,
use that stretch in both cases: read as the job starts and again whenever a deadline passes, so load that
arrives mid-job moves the deadline instead of killing an honest call.
"""

from __future__ import annotations

import math
import os
import threading

LOADAVG = "/proc/loadavg"
OWN_TIME_RULE = ("wall limit on own time: the wall clock less the call's waits for a CPU (run_delay in the "
                 "candidate's schedstat), the job's other processes counted as its CPU time; each call timed from "
                 "outside the candidate's process by the job's steward, from sending its input to its answer")
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


def waits_reported() -> bool:
    """Whether the kernel reports a thread's waits for a CPU (CONFIG_SCHED_INFO; the steward reads the candidate's
    as this reads its own)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stream:
            int(stream.read().split()[1])
        return True
    except (OSError, IndexError, ValueError):
        return False


class LoadGauge:
    """``wall_scale()``: what a starting job's wall limits are multiplied by (1 under the own-time rule);
    ``stretch()``: the machine's load as a factor, for the parent's deadlines. Every stretch read is kept for
    the run record."""

    def __init__(self) -> None:
        self.cores = usable_cores()
        self.own_time = waits_reported()
        self.rule = OWN_TIME_RULE if self.own_time else SCALE_RULE
        self._lock = threading.Lock()
        self.readings: list[float] = []

    def stretch(self) -> float:
        tasks = round(sum(runnable_tasks() for _ in range(READS)) / READS)
        value = float(max(1, math.ceil(tasks / self.cores)))
        with self._lock:
            self.readings.append(value)
        return value

    def wall_scale(self) -> float:
        return 1.0 if self.own_time else self.stretch()

    def summary(self) -> dict:
        """What run.json records: the rule of the wall limits, and the load the parent's deadlines were set by."""
        with self._lock:
            readings = list(self.readings)
        stats = {"reads": len(readings)}
        if readings:
            stats.update(mean=round(sum(readings) / len(readings), 3), max=max(readings),
                         loaded=sum(r > 1.0 for r in readings))
        return {"rule": self.rule, "usable_cores": self.cores, "load_scale": stats}
