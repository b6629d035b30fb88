"""The job's first process in ``call`` mode: it runs the candidate's program in a child and times every call of it
from outside.

Standalone (stdlib only), imported by ``child_runner.py``. The steward forks the candidate's process before it
reads the calls' inputs, so the candidate's memory never holds an input before its call (no work moves into
loading the program, which EvalPlus's per-call limits would have stopped). It then sends the inputs one line at a
time and measures each call from the moment it sends the input to the moment the answer has arrived, with the
kernel's counters for the candidate's process (``step_limits.JobClock``); over a limit, it kills the candidate.
The candidate is Python code in the candidate's interpreter and may rewrite whatever runs there: nothing there
decides a time. The steward is protected from it as the kernel protects a pid namespace's init (it takes no
signal from the job) and by being non-dumpable (no /proc/1/mem; seccomp denies ptrace and process_vm_*).

The time between the two moments holds, besides the call, the candidate's decoding of the input and encoding of
the answer: a call gets :data:`SHIP_S` plus the line's bytes at :data:`SHIP_RATE` on top of its limit, the answer
counted as the steward re-encodes it (whitespace a candidate pads its line with buys nothing).
"""

import ctypes
import json
import os
import select
import signal
from time import monotonic

try:  # run as a script: its siblings are on the path
    from step_limits import Budgets, JobClock
except ImportError:  # imported from the package (tests)
    from .step_limits import Budgets, JobClock

SHIP_S = 0.02  # per call: the two pipe hops and the steward's readings
# bytes/s for decoding an input and encoding an answer in the candidate's process: 4x under the slowest shape
# measured (2.1 MiB/s for deeply nested lists, a 2-core AMD EPYC); strings and flat lists run at 6-170 MiB/s
SHIP_RATE = 512 << 10
LINE_CAP = (32 << 20) + (1 << 20)  # child_runner.OUTPUT_CAP plus 1 MiB for the record around an output
PR_SET_DUMPABLE = 4
SETUP_FAILED = 121  # zygote.SETUP_FAILED, the job's confinement failed: never a status the candidate can choose
libc = ctypes.CDLL(None, use_errno=True)
LOAD_FAILED = {  # the load step's record when the candidate's process did not answer it
    "timeout": {"load_error": "Timeout", "msg": "program did not finish loading"},
    "flood": {"load_error": "ProtocolError", "msg": "the program's process flooded its answer channel"},
}


class Candidate:
    """The candidate's process, seen from the steward: its pid, the pipe it reads calls from and the pipe its
    answers come back on, one JSON line each."""

    def __init__(self, pid, inbox_fd, answers_fd, own_namespace, started):
        self.pid, self.inbox, self.answers, self.started = pid, inbox_fd, answers_fd, started
        self.clock = JobClock(pid, own_namespace)
        self.buffer, self.status = bytearray(), None
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # kernels before 5.3: its death shows as EOF or at the limit
            self.pidfd = None
        self.cores = max(1, len(os.sched_getaffinity(0)))

    def send(self, line):
        view = memoryview(line)
        while view:
            view = view[os.write(self.inbox, view):]

    def pending(self):
        """Whether the candidate wrote anything (or ended) before it was asked."""
        return bool(self.buffer) or bool(select.select([self.answers], [], [], 0)[0])

    def answer(self, start, cpu_limit, wall_limit, sent):
        """``(kind, line, spent)`` of the step that began at the reading ``start``, allowed ``cpu_limit`` and
        ``wall_limit`` seconds plus the shipping of ``sent`` bytes and of what has arrived: kind "line" (with the
        answer line and the (CPU, own) seconds spent when it had arrived), "timeout", "died" or "flood"."""
        watched = [self.answers] + ([self.pidfd] if self.pidfd is not None else [])
        spent = (0.0, 0.0)  # the call has just begun: its first wait needs no reading
        while True:
            cut = self.buffer.find(b"\n")
            if cut >= 0:
                line = bytes(self.buffer[:cut])
                del self.buffer[:cut + 1]
                return "line", line, spent
            if len(self.buffer) > LINE_CAP:
                return "flood", None, spent
            if not _within(spent, cpu_limit, wall_limit, sent + len(self.buffer)):
                return "timeout", None, spent
            extra = _allowance(sent + len(self.buffer))
            wait = min(wall_limit + extra - spent[1], (cpu_limit + extra - spent[0]) / self.cores)
            ready = select.select(watched, [], [], max(wait, 0.001))[0]
            if self.answers in ready:
                data = os.read(self.answers, 1 << 20)
                if not data:
                    return "died", None, spent
                self.buffer += data
            elif ready:
                return "died", None, spent
            spent = self.clock.spent(start)

    def end(self):
        """Kill the candidate (whatever it left running: its calls are over) and collect its exit status."""
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.status = os.waitpid(self.pid, 0)[1]
        self.clock.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        return self.status


def start(job, candidate_main, payload_fd, channel, own_namespace):
    """Fork the candidate's process (``candidate_main(job, inbox_fd, answers_fd)``, which never returns), in which
    the payload and the parent's result channel are closed (the runner's ``channel`` writes nowhere there); this
    process becomes its steward."""
    started = (0.0, monotonic())  # the load step's start: the new process has spent no CPU and waited for none
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # before the fork: no moment in which the candidate may read this memory
    inbox_r, inbox_w = os.pipe()
    answers_r, answers_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (payload_fd, channel.fd, inbox_w, answers_r):
            os.close(fd)
        channel.fd, channel.nonce = -1, None
        candidate_main(job, inbox_r, answers_w)
        os._exit(0)
    os.close(inbox_r)
    os.close(answers_w)
    for signum in (signal.SIGINT, signal.SIGALRM, signal.SIGPROF, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                   signal.SIGUSR2):
        signal.signal(signum, signal.SIG_DFL)  # pid 1 takes no signal it has no handler for
    return Candidate(pid, inbox_w, answers_r, own_namespace, started)


def _load_record(line):
    """The load step's record to forward: ready, or the load error the candidate reported."""
    try:
        record = json.loads(line)
        if record.get("ready") is True:
            return {"ready": True}
        return {"load_error": str(record["load_error"])[:80], "msg": str(record.get("msg", ""))[:300]}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, MemoryError):
        return {"load_error": "ProtocolError", "msg": "the program's process broke the call protocol"}


def _call_record(index, line):
    """The call's record to forward (its answer, or the error it raised), or None when the line is not one."""
    try:
        record = json.loads(line)
        if "ok" in record:
            t = record.get("t")
            out = {"i": index, "ok": record["ok"]}
            if type(t) is float and 0.0 <= t < 1e9:
                out["t"] = t  # the call's CPU time as the process measured it: a reference's, for the limits
            return out
        return {"i": index, "err": str(record["err"])[:80], "msg": str(record.get("msg", ""))[:300]}
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, MemoryError):
        return None


def _died(candidate, index):
    """What the candidate's death ends the job with: a timeout record where the CPU rlimit or a kill ended it
    (``None`` returned: the job goes on to its end record), else the exit status the job exits with itself, as
    the candidate's process would have (the parent reports it as a crash)."""
    status = candidate.end()
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
        return None, LOAD_FAILED["timeout"] if index is None else {"i": index, "timeout": True}
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    return (1 if code == SETUP_FAILED else code), None


def _allowance(shipped):
    """Seconds a step gets on top of its limits: the pipe hops, and ``shipped`` bytes decoded or encoded."""
    return SHIP_S + shipped / SHIP_RATE


def _within(spent, cpu_limit, wall_limit, shipped):
    extra = _allowance(shipped)
    return spent[0] <= cpu_limit + extra and spent[1] <= wall_limit + extra


def run_calls(job, candidate, read_inputs, channel, too_costly):
    """Steward the candidate's program through its load (from the reading taken before the fork) and its calls;
    the records go to the parent on ``channel``. Returns None, or an exit status for the job when the candidate's
    process ended on its own before its calls were done. ``too_costly(line)``: an answer line the child's own
    encoder would have refused (it is then not parsed here)."""
    scale, load_limit = job.get("wall_scale", 1.0), job["load_limit"]
    inputs = read_inputs()  # while the candidate loads (the parent's deadline for loading counts their shipping)
    kind, line, spent = candidate.answer(candidate.started, load_limit, load_limit * scale, 0)
    if kind == "line" and not _within(spent, load_limit, load_limit * scale, len(line)):
        kind = "timeout"
    if kind != "line":
        code, record = _died(candidate, None) if kind == "died" else (None, LOAD_FAILED[kind])
        if record is not None:
            channel.send(record)
        candidate.end()
        return code
    record = _load_record(line)
    channel.send(record)
    if "ready" not in record:
        candidate.end()
        return None
    budgets = Budgets(job.get("budgets"), spent[0], spent[1], scale)
    for i, (call, limit) in enumerate(zip(inputs, job["limits"])):
        code, record, data = _call(candidate, budgets, i, call, limit, too_costly, channel)
        if record is not None:
            channel.write(data or channel.line(record))
        if record is None or "timeout" in record or "protocol" in record:  # the candidate is gone, or must go
            candidate.end()
            return code
    channel.send({"done": len(inputs)})
    candidate.end()
    return None


def _call(candidate, budgets, index, call, limit, too_costly, channel):
    """One call: ``(exit status or None, record to forward or None, that record's line when already made)``."""
    now = candidate.clock.reading()
    cpu_limit, wall_limit = budgets.cut(index, limit, now)
    if cpu_limit <= 0 or wall_limit <= 0:
        return None, {"i": index, "timeout": True, "budget": True}, None
    if candidate.pending():
        return None, {"i": index, "protocol": "answered a call before it was made"}, None
    line = (json.dumps(call, separators=(",", ":")) + "\n").encode()
    try:
        candidate.send(line)
    except OSError:
        return (*_died(candidate, index), None)
    kind, answer, spent = candidate.answer(now, cpu_limit, wall_limit, len(line))
    if kind == "died":
        return (*_died(candidate, index), None)
    if kind != "line":
        return None, ({"i": index, "timeout": True} if kind == "timeout"
                      else {"i": index, "protocol": "flooded its answer channel"}), None
    record = None if too_costly(answer) else _call_record(index, answer)
    if record is None:
        return None, {"i": index, "protocol": "the answer is not a result record"}, None
    try:
        data = channel.line(record)
    except ValueError:  # NaN or a float beyond the double range, written bare: the child's encoder tags them
        return None, {"i": index, "protocol": "the answer is not plain JSON"}, None
    if not _within(spent, cpu_limit, wall_limit, len(line) + len(data)):
        return None, {"i": index, "timeout": True}, None
    return None, record, data
