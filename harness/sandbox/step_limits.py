"""The sandbox's limits on one step of a job (loading the program, one call), measured from outside the candidate.

Standalone (stdlib only), imported by ``steward.py`` and ``child_runner.py`` as ``zygote.py`` and ``seccomp.py``
are. The steward, the job's trusted first process, reads them for the candidate's process it started, from the
kernel's counters: nothing the candidate does in its own interpreter (stopping clocks, patching the runner,
catching or blocking alarms) changes them. A step's CPU time is the whole job's (:meth:`JobClock.cpu`: the
candidate and every process it started, alive or ended, so the waits a candidate causes itself buy it nothing);
its wall time is its *own time* (:meth:`JobClock.own`: the wall clock less the time the candidate's calling
thread waited for a CPU, the kernel's ``run_delay``), so no other process lengthens or shortens what a call may
sleep (``dare.harness.sandbox.load`` has the rule).
"""

import os
from time import monotonic


class Timeout(BaseException):
    """A trusted reference's tests ran past their alarm (``record`` mode: one ITIMER_REAL for all of them)."""


def _alarm(signum, frame):
    raise Timeout()


TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


class JobClock:
    """The times of one job, read by the steward for its candidate ``pid``. ``own_namespace``: the job has a pid
    namespace of its own, so /proc lists the job's processes alone; without one (``--unsafe-local-exec``) /proc
    is the host's, and only the candidate and what it reaped count."""

    def __init__(self, pid, own_namespace):
        self.pid, self.own_namespace, self.fds = pid, own_namespace, {}
        self.stat, self.schedstat = f"/proc/{pid}/stat", f"/proc/{pid}/task/{pid}/schedstat"

    def _read(self, path):
        """The bytes of a small /proc file, kept open for the job (a call's limits read it twice)."""
        fd = self.fds.get(path)
        if fd is None:
            fd = self.fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return os.pread(fd, 4096, 0)

    def own(self):
        """Seconds of the candidate's own time: the wall clock less the time its main thread (which makes the
        calls) was runnable but waited for a CPU. On an idle machine it is the wall clock. Where the kernel does
        not report the wait, or the thread is gone, the wall clock."""
        try:
            return monotonic() - int(self._read(self.schedstat).split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return monotonic()

    def cpu(self):
        """CPU seconds of the job but the steward: the candidate (every thread, and the children it reaped) and,
        in a pid namespace of the job's own, every other process it lists (orphans stay listed: the steward reaps
        nothing before the calls are over). While no process but the candidate was ever started (the namespace's
        last pid is its), that is the candidate alone."""
        pids = [self.pid]
        if self.own_namespace:
            try:
                if int(self._read("/proc/loadavg").split()[4]) != self.pid:
                    me = os.getpid()
                    pids = [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != me]
            except (OSError, IndexError, ValueError):
                pass
        ticks = 0
        for pid in pids:
            try:
                data = self._read(self.stat) if pid == self.pid else _stat(pid)
                fields = data.rsplit(b")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
            except (OSError, IndexError, ValueError):
                continue  # ended between the listing and the read: its reaper counts it
        return ticks * TICK_S

    def reading(self):
        """(job CPU seconds, own seconds) now: what a step's or a group's limits are measured from."""
        return self.cpu(), self.own()

    def spent(self, start):
        """(job CPU seconds, own seconds) since the ``start`` reading."""
        cpu, own = self.reading()
        return cpu - start[0], own - start[1]

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def _stat(pid):
    with open(f"/proc/{pid}/stat", "rb") as stream:
        return stream.read()


class Budgets:
    """Budgets of consecutive groups of calls, ``[[end_index, seconds], ...]``: EvalPlus checks base and plus
    inputs as two processes, each under its own process timeout. A group is over its budget when the job's CPU
    time is, or its own time (EvalPlus's timeout counts wall time, without the waits a busy machine adds) is over
    the budget times the job's wall scale. Loading the program counts against every group, since each of
    EvalPlus's processes loads it again."""

    def __init__(self, groups, load_cpu_s, load_wall_s, scale):
        self.groups, self.load, self.scale = groups or [], (load_cpu_s, load_wall_s), scale
        self.group, self.start = -1, (0.0, 0.0)

    def cut(self, index, limit, now):
        """``(CPU, wall)`` limits of the call starting at the reading ``now``: its own, cut to what its group
        has left (0 or less: spent)."""
        group = next((g for g, (end, _) in enumerate(self.groups) if index < end), None)
        if group is None:
            return limit, limit * self.scale
        if group != self.group:
            self.group, self.start = group, now
        budget = self.groups[group][1]
        cpu_left = budget - self.load[0] - (now[0] - self.start[0])
        wall_left = budget * self.scale - self.load[1] - (now[1] - self.start[1])
        return min(limit, cpu_left), min(limit * self.scale, wall_left)
