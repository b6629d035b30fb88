"""Moving one job's bytes under the parent's clock: payload in, result lines and capped stderr out.

The parent owns every deadline (:class:`Clock`): the whole job, and optionally each step of it (loading
the program, then each test), measured from the arrival of the previous record. A missed deadline ends
the job from outside (the caller kills the process tree); nothing depends on an alarm inside the child.
stdout (the result channel) and stderr are read through pipes with byte caps: beyond a cap the bytes are
drained and discarded and a flag is set, so a flood costs the parent no memory. The record splitter is
linear in the bytes received, whatever their shape (one huge line, or millions of tiny ones).
:func:`run_child` runs one job in a fresh process (a one-job sandbox); ``warm.py`` runs jobs through a
slot's zygote with the same :class:`Pump`.
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

from .isolation import PYTHON_ENV

CHUNK = 1 << 16
STEP_SLACK_S = 1.0  # per step, on top of the child's own limit: pipe latency and a loaded machine
END_S = 1.0  # after its last test: the end records and the exit, which run no candidate code
ENCODE_RATE = 256 << 10  # bytes/s of a record: the child's encoding and sending on a heavily loaded machine
# bytes/s of the program text in the payload (read and parsed as one JSON string; compiling it is part of the
# load step's own limit): the candidate sets its length, so this term is small (4 MiB: 0.5 s)
PROGRAM_RATE = 8 << 20




def step_limit(limit_s: float, record_bytes: int) -> float:
    """The parent's deadline for one step: the child's own wall limit for it, plus the time to decode its input
    and to encode and ship an answer, ``record_bytes`` together (a correct answer is about as large as the
    expected one), which the child's alarms exclude."""
    return limit_s + record_bytes / ENCODE_RATE


@dataclasses.dataclass
class ChildResult:
    """What the parent observed. ``stopped`` means the record callback asked to stop early."""

    returncode: int | None
    timed_out: bool
    stopped: bool
    stdout_truncated: bool
    stderr_truncated: bool
    stderr: bytes
    wall_s: float


class Clock:
    """Deadlines of one job: ``total_s`` for all of it; ``steps[k]`` seconds for step k (step 0 from the start,
    step k from the k-th record), each plus :data:`STEP_SLACK_S`; after the listed steps, :data:`END_S` for
    the job to end (its last records and its exit), however many records it sends. Without steps only the
    total applies. ``stretch()`` (the machine's load as a factor; 1 without one) multiplies the seconds: read
    by :meth:`restart`, and again when a deadline passes (:meth:`extend`), so load that arrives mid-job moves the
    deadlines instead of ending an honest job. A new clock counts from now at a factor of 1."""

    def __init__(self, total_s: float, steps: Sequence[float] = (), stretch: Callable[[], float] | None = None):
        self.total_s, self.steps = total_s, list(steps) + ([END_S] if steps else [])
        self.stretch = stretch
        self._begin(1.0)

    def restart(self) -> None:
        """Start counting now, at the machine's load now (the job is about to begin)."""
        self._begin(self.stretch() if self.stretch else 1.0)

    def _begin(self, scale: float) -> None:
        self.start = self.step_start = time.monotonic()
        self.scale, self.step = scale, 0
        self._deadlines()

    def _deadlines(self) -> None:
        self.end = self.start + self.total_s * self.scale
        step_s = self.steps[self.step] if self.step < len(self.steps) else None
        if step_s is not None:
            self.step_end = self.step_start + step_s * self.scale + STEP_SLACK_S
        elif not self.steps:
            self.step_end = float("inf")

    def advance(self) -> None:
        """A record arrived: the next step starts. Past the list the last deadline stands."""
        self.step += 1
        if self.step < len(self.steps):
            self.step_start = time.monotonic()
            self._deadlines()

    def extend(self) -> bool:
        """A deadline passed: True when the machine is busier now than when the deadlines were set and the
        deadlines its load gives lie ahead (they are moved there), False when the job is out of time."""
        scale = self.stretch() if self.stretch else 1.0
        if scale <= self.scale:
            return False
        self.scale = scale
        self._deadlines()
        return self.remaining() > 0

    def remaining(self) -> float:
        return min(self.end, self.step_end) - time.monotonic()


class LineStream:
    """Splits the result channel into lines within a byte budget; every byte is scanned once."""

    def __init__(self, cap: int, on_line: Callable[[bytes], bool]):
        self.cap, self.on_line = cap, on_line
        self.buffer, self.scanned, self.total, self.truncated, self.stop = bytearray(), 0, 0, False, False

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.truncated or self.stop:
            return
        if self.total > self.cap:
            self.truncated = True
            self.buffer = bytearray()
            return
        self.buffer += data
        start = 0
        while not self.stop:
            cut = self.buffer.find(b"\n", self.scanned)
            if cut < 0:
                self.scanned = len(self.buffer)
                break
            line = bytes(self.buffer[start:cut])
            start = self.scanned = cut + 1
            self.stop = not self.on_line(line)
        if start:
            del self.buffer[:start]
            self.scanned -= start


class Pump:
    """One job's pipes: ``payload`` is written to ``stdin_fd`` (owned by the pump, closed once written, so the
    job sees EOF) while the result lines and stderr are read (fds owned by the caller). :meth:`run` returns
    "ended", "timeout", "stopped" or "truncated"."""

    def __init__(self, payload: bytes, stdin_fd: int, stdout_fd: int, stderr_fd: int, stdout_cap: int,
                 stderr_cap: int, on_line: Callable[[bytes], bool]):
        self.pending, self.stdin_fd = memoryview(payload), stdin_fd
        self.lines = LineStream(stdout_cap, on_line)
        self.stderr, self.stderr_total, self.stderr_cap = bytearray(), 0, stderr_cap
        self.open = {stdout_fd: self.lines.feed, stderr_fd: self._stderr}
        for fd in (stdin_fd, stdout_fd, stderr_fd):
            os.set_blocking(fd, False)
        if not self.pending:
            self.close_stdin()

    def close_stdin(self) -> None:
        self.pending = memoryview(b"")
        if self.stdin_fd >= 0:
            os.close(self.stdin_fd)
            self.stdin_fd = -1

    def _stderr(self, data: bytes) -> None:
        self.stderr_total += len(data)
        self.stderr += data[: max(0, self.stderr_cap - len(self.stderr))]

    def run(self, clock: Clock, finished: Callable[[], bool],
            extra: tuple[int, Callable[[], None]] | None = None) -> str:
        """Until both output pipes are at EOF and ``finished()``; ``extra`` = (fd, handler) is also watched."""
        sel = selectors.DefaultSelector()
        try:
            if self.pending:
                sel.register(self.stdin_fd, selectors.EVENT_WRITE)
            for fd in self.open:
                sel.register(fd, selectors.EVENT_READ)
            if extra is not None:
                sel.register(extra[0], selectors.EVENT_READ)
            while self.open or not finished():
                remaining = clock.remaining()
                if remaining <= 0 and not clock.extend():
                    return "timeout"
                remaining = max(remaining, clock.remaining())
                # with both pipes at EOF only the exit (or the zygote's end report) is awaited: poll it briefly
                for key, _ in sel.select(timeout=min(remaining, 0.005 if not self.open else 0.5)):
                    self._ready(sel, key.fd, extra)
                if self.lines.truncated:
                    return "truncated"
                if self.lines.stop:
                    return "stopped"
            return "ended"
        finally:
            sel.close()
            if self.pending:  # not all written: the job is being ended anyway
                self.close_stdin()

    def _ready(self, sel: selectors.BaseSelector, fd: int, extra) -> None:
        if fd == self.stdin_fd:
            try:
                self.pending = self.pending[os.write(fd, self.pending[:CHUNK]):]
            except (BrokenPipeError, BlockingIOError, OSError):
                self.pending = self.pending[:0]
            if not self.pending:
                sel.unregister(fd)
                self.close_stdin()
            return
        if extra is not None and fd == extra[0]:
            extra[1]()
            return
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        if data:
            self.open[fd](data)
        else:
            sel.unregister(fd)
            del self.open[fd]


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(argv: list[str], payload: bytes, clock: Clock, on_line: Callable[[bytes], bool],
              stdout_cap: int, stderr_cap: int, cwd: str | None = None) -> ChildResult:
    """Run ``argv`` (a fresh process tree for one job) with ``payload`` on stdin."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, close_fds=True, env=dict(PYTHON_ENV), cwd=cwd)
    stdin_fd = os.dup(proc.stdin.fileno())
    proc.stdin.close()
    pump = Pump(payload, stdin_fd, proc.stdout.fileno(), proc.stderr.fileno(), stdout_cap, stderr_cap, on_line)
    try:
        reason = pump.run(clock, lambda: proc.poll() is not None)
    finally:
        kill_group(proc)  # the child is done or must go; either way nothing of it may survive
        pump.close_stdin()
        for stream in (proc.stdout, proc.stderr):
            stream.close()
        returncode = proc.wait()
    return ChildResult(returncode, reason == "timeout", reason == "stopped", pump.lines.truncated,
                       pump.stderr_total > stderr_cap, bytes(pump.stderr), time.monotonic() - clock.start)
