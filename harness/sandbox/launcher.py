"""Start one sandboxed child, feed it its job, stream its result records, and enforce the deadline.

The parent owns the clock: the wall-clock deadline is enforced here by killing the child's whole process
group (bwrap's pid namespace then takes every descendant with it), never by trusting an alarm inside the
child. stdout (the result channel) and stderr are read through pipes with byte caps: beyond a cap the
bytes are drained and discarded and a flag is set, so a flood costs the parent no memory.
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable

from .isolation import PYTHON_ENV

CHUNK = 1 << 16


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


class _LineStream:
    """Splits the result channel into lines, within a byte budget."""

    def __init__(self, cap: int, on_line: Callable[[bytes], bool]):
        self.cap, self.on_line = cap, on_line
        self.buffer, self.total, self.truncated, self.stop = bytearray(), 0, False, False

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.truncated or self.stop:
            return
        if self.total > self.cap:
            self.truncated = True
            return
        self.buffer += data
        while not self.stop and (cut := self.buffer.find(b"\n")) >= 0:
            line = bytes(self.buffer[:cut])
            del self.buffer[: cut + 1]
            self.stop = not self.on_line(line)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(argv: list[str], job: bytes, deadline_s: float, on_line: Callable[[bytes], bool],
              stdout_cap: int, stderr_cap: int, cwd: str | None = None) -> ChildResult:
    """Run ``argv`` with ``job`` on stdin; ``on_line`` gets each result line and returns False to stop."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, close_fds=True, env=dict(PYTHON_ENV), cwd=cwd)
    lines = _LineStream(stdout_cap, on_line)
    stderr, stderr_total = bytearray(), 0
    sel = selectors.DefaultSelector()
    os.set_blocking(proc.stdin.fileno(), False)
    sel.register(proc.stdin, selectors.EVENT_WRITE)
    sel.register(proc.stdout, selectors.EVENT_READ)
    sel.register(proc.stderr, selectors.EVENT_READ)
    pending, timed_out = memoryview(job), False
    try:
        while sel.get_map():
            remaining = start + deadline_s - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in sel.select(timeout=min(remaining, 0.5)):
                if key.fileobj is proc.stdin:
                    try:
                        pending = pending[os.write(proc.stdin.fileno(), pending[:CHUNK]):]
                    except (BrokenPipeError, OSError):
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(proc.stdin)
                        proc.stdin.close()
                    continue
                data = os.read(key.fileobj.fileno(), CHUNK)
                if not data:
                    sel.unregister(key.fileobj)
                elif key.fileobj is proc.stdout:
                    lines.feed(data)
                else:
                    stderr_total += len(data)
                    if len(stderr) < stderr_cap:
                        stderr += data[: stderr_cap - len(stderr)]
            if lines.stop or lines.truncated:
                break
    finally:
        _kill_group(proc)  # the child is done or must go; either way nothing of it may survive
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream and not stream.closed:
                stream.close()
        sel.close()
        returncode = proc.wait()
    return ChildResult(returncode, timed_out, lines.stop, lines.truncated, stderr_total > stderr_cap,
                       bytes(stderr), time.monotonic() - start)
