"""The sandbox's limits on one step of a job (loading the program, one call), inside the job's process.

Standalone (stdlib only), imported by ``child_runner.py`` as ``zygote.py`` and ``seccomp.py`` are. A step's
CPU time is the whole job's (:func:`job_cpu`: this process and every process it started, so the waits a
candidate causes itself buy it nothing); its wall time is its *own time* (:func:`own_clock`: the wall clock
less the time the thread waited for a CPU, which the kernel counts as ``run_delay``), so no other process
lengthens or shortens what a call may sleep (``dare.harness.sandbox.load`` has the rule). ITIMER_PROF and
ITIMER_REAL stop a step that runs over; the alarm is set again while the waits explain the clock, and the
measured times decide after the step, whatever it did with the alarms.
"""

import os
import resource

# bound here, before any candidate code runs: a program may rebind names in builtins (as child_runner.py says)
from builtins import enumerate, int, max, min, next, object, open  # noqa: UP029
from signal import ITIMER_PROF, ITIMER_REAL, SIG_UNBLOCK, SIGALRM, SIGPROF, pthread_sigmask, setitimer
from signal import signal as set_handler
from time import monotonic, process_time


class Timeout(BaseException):
    """A step over its limit: raised by the alarms, and again after the step when it ran over although it
    caught the alarm's exception (a limit the candidate can catch is not a limit)."""


FIRED = []  # non-empty once an alarm fired during the current step
STEP = []  # the step under way: [(its start reading, CPU limit, wall limit)], or [BETWEEN] after one
BETWEEN = object()  # a step has ended: a timer that ran out as it ended is answered by the step's measured times
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _alarm(signum, frame):
    """SIGPROF: this process spent its CPU limit. SIGALRM: the step's wall limit has passed on the clock; if
    waiting for a CPU explains it (its own time is still under the limit) and the job's CPU is too, the alarm is
    set again for what is left, so a busy machine stretches a call's wall time without failing it."""
    if STEP and STEP[0] is BETWEEN:
        return
    if signum == SIGALRM and STEP:
        start, cpu_limit, wall_limit = STEP[0]
        cpu, own = spent(start)
        if cpu <= cpu_limit and own < wall_limit:
            setitimer(ITIMER_REAL, max(wall_limit - own, 0.005))
            return
    FIRED.append(signum)
    raise Timeout()


PROC_FDS = {}  # small /proc files kept open for the whole job: a call's limits read them twice


def proc_read(path):
    """The bytes of a small /proc file (read again from its start; reopened where the program closed it)."""
    for _ in range(2):
        fd = PROC_FDS.get(path)
        try:
            if fd is None:
                fd = PROC_FDS[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            return os.pread(fd, 4096, 0)
        except OSError:
            PROC_FDS.pop(path, None)
    raise OSError("cannot read " + path)


def own_clock():
    """Seconds of this thread's own time: the wall clock less the time it was runnable but waited for a CPU (the
    kernel's run_delay). On an idle machine it is the wall clock; other processes, whoever runs them, do not
    lengthen it. Where the kernel does not report the wait, the wall clock."""
    try:
        return monotonic() - int(proc_read("/proc/thread-self/schedstat").split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return monotonic()


OWN_PID_NAMESPACE = []  # [True] when the parent ran the job in a pid namespace of its own (its /proc is the job's)


def job_cpu():
    """CPU seconds of the whole job: this process (every thread) and every other process of it, alive or ended
    (the job's /proc lists only its own pid namespace; ended ones are counted by whoever reaped them). The job's
    own busy processes thus count against its limit, and the waits they cause are not the machine's. While the
    job has started no process or thread (the namespace's last pid is its own), that is this process alone.
    Without a pid namespace of its own, /proc is the host's: this process and those it reaped."""
    me = os.getpid()
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = process_time() + reaped.ru_utime + reaped.ru_stime
    if not OWN_PID_NAMESPACE:
        return total
    try:
        if int(proc_read("/proc/loadavg").split()[4]) == me:
            return total
        names = os.listdir("/proc")
    except (OSError, IndexError, ValueError):
        return total
    ticks = 0
    for name in names:
        if name.isdigit() and int(name) != me:
            try:
                with open("/proc/" + name + "/stat", "rb") as stream:
                    fields = stream.read().rsplit(b")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
            except (OSError, IndexError, ValueError):
                continue  # ended between the listing and the read: its reaper counts it
    return total + ticks * TICK_S


def reading():
    """(job CPU seconds, own seconds) now: what a step's or a group's limits are measured from."""
    return job_cpu(), own_clock()


def spent(start):
    """(job CPU seconds, own seconds) since the ``start`` reading."""
    cpu, own = reading()
    return cpu - start[0], own - start[1]


def arm(cpu_s, wall_s):
    """Arm one step's limits. The handlers are installed and the signals unblocked again first: the program
    may have ignored, replaced or blocked them since (EvalPlus's time_limit installs its handler per call)."""
    set_handler(SIGALRM, _alarm)
    set_handler(SIGPROF, _alarm)
    pthread_sigmask(SIG_UNBLOCK, (SIGALRM, SIGPROF))
    FIRED.clear()
    setitimer(ITIMER_PROF, cpu_s)
    setitimer(ITIMER_REAL, wall_s)


def disarm():
    setitimer(ITIMER_PROF, 0)
    setitimer(ITIMER_REAL, 0)


def limited(cpu_limit, wall_limit, step, args=(), kwargs=None):
    """``(step(*args, **kwargs), CPU seconds, own seconds)`` under ``cpu_limit`` seconds of the job's CPU time
    (ITIMER_PROF for this process, the job's other processes checked with the wall alarm and after the step)
    and ``wall_limit`` seconds of own time (:func:`own_clock`: wall time less the waits for a CPU, for steps that
    sleep or block; ITIMER_REAL, set again while the waits explain the clock). Raises Timeout when an alarm
    fired or either time was over its limit, whatever the step did with the alarm's exception; another exception
    of the step passes through when the step kept within its limits."""
    cpu_limit, wall_limit = max(cpu_limit, 0.001), max(wall_limit, 0.001)
    start = reading()
    STEP[:] = [(start, cpu_limit, wall_limit)]
    arm(cpu_limit, wall_limit)
    try:
        try:
            value = step(*args, **(kwargs or {}))
        finally:
            STEP[:] = [BETWEEN]  # from here the measured times decide: an alarm now must not set the timer again
            disarm()
    except BaseException:
        cpu, own = spent(start)
        if FIRED or cpu > cpu_limit or own > wall_limit:
            raise Timeout() from None
        raise
    cpu, own = spent(start)
    if FIRED or cpu > cpu_limit or own > wall_limit:
        raise Timeout()
    return value, cpu, own


class Budgets:
    """Budgets of consecutive groups of calls, ``[[end_index, seconds], ...]``: EvalPlus checks base and plus
    inputs as two processes, each under its own process timeout. A group is over its budget when the job's CPU
    time is, or its own time (:func:`own_clock`: EvalPlus's timeout counts wall time, without the waits a busy
    machine adds) is over the budget times the job's wall scale. Loading the program counts against every group,
    since each of EvalPlus's processes loads it again."""

    def __init__(self, groups, load_cpu_s, load_wall_s, scale):
        self.groups, self.load, self.scale = groups or [], (load_cpu_s, load_wall_s), scale
        self.group, self.start = -1, (0.0, 0.0)

    def cut(self, index, limit):
        """``(CPU, wall)`` limits of the call: its own, cut to what its group has left (0 or less: spent)."""
        group = next((g for g, (end, _) in enumerate(self.groups) if index < end), None)
        if group is None:
            return limit, limit * self.scale
        now = reading()
        if group != self.group:
            self.group, self.start = group, now
        budget = self.groups[group][1]
        cpu_left = budget - self.load[0] - (now[0] - self.start[0])
        wall_left = budget * self.scale - self.load[1] - (now[1] - self.start[1])
        return min(limit, cpu_left), min(limit * self.scale, wall_left)
