"""A warm sandbox per worker slot: one isolated child stays up and forks a fresh process for each job.

Starting bubblewrap and an interpreter costs more than most HumanEval/MBPP tests take to run, so each
slot keeps one sandboxed *server* (``child_runner.serve``) that never runs candidate code itself: per job
it forks, the fork runs the job, then the server kills everything else its uid owns in the sandbox and
wipes /tmp before reporting the job's end on a private status pipe that no job process holds (the server
is non-dumpable, so jobs cannot reach its descriptors through /proc). On a deadline, an output flood, a
dead server, or an early stop (first failing test) not followed by the job's end within a short grace,
the parent kills the whole sandbox; the next job starts a new one.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Callable

from .isolation import PYTHON_ENV
from .launcher import CHUNK, ChildResult, _kill_group, _LineStream

STOP_GRACE_S = 0.2


class WarmServer:
    """One persistent sandboxed server. Not thread-safe: a slot uses it for one job at a time."""

    def __init__(self, argv: list[str], stdout_cap: int, stderr_cap: int):
        self.argv, self.stdout_cap, self.stderr_cap = argv, stdout_cap, stderr_cap
        self.proc: subprocess.Popen | None = None
        self.jobs = 0

    def _start(self) -> None:
        status_read, status_write = os.pipe()
        self.proc = subprocess.Popen([*self.argv, "serve", str(status_write)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(status_write,),
                                     start_new_session=True, env=dict(PYTHON_ENV))
        os.close(status_write)
        self.status = os.fdopen(status_read, "rb", buffering=0)
        for stream in (self.proc.stdout, self.proc.stderr, self.status):
            os.set_blocking(stream.fileno(), False)

    def stop(self) -> None:
        if self.proc is not None:
            _kill_group(self.proc)
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr, self.status):
                if not stream.closed:
                    stream.close()
            self.proc.wait()
            self.proc = None

    def run(self, job: dict, deadline_s: float, on_line: Callable[[bytes], bool]) -> ChildResult:
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self._start()
        self.jobs += 1
        job_id = self.jobs
        start = time.monotonic()
        lines = _LineStream(self.stdout_cap, on_line)
        stderr, stderr_total, ended, status = bytearray(), 0, False, None
        payload = (json.dumps({**job, "id": job_id}, separators=(",", ":"), allow_nan=False) + "\n").encode()
        sel = selectors.DefaultSelector()
        try:
            self.proc.stdin.write(payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.stop()
            return ChildResult(None, False, False, False, False, b"warm server died", time.monotonic() - start)
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        sel.register(self.proc.stderr, selectors.EVENT_READ)
        sel.register(self.status, selectors.EVENT_READ)
        timed_out = dead = False
        grace_end = None  # after an early stop, a short wait for the job to end keeps the server warm
        try:
            while not ended:
                limit = start + deadline_s if grace_end is None else min(start + deadline_s, grace_end)
                remaining = limit - time.monotonic()
                if remaining <= 0:
                    timed_out = grace_end is None
                    break
                for key, _ in sel.select(timeout=min(remaining, 0.5)):
                    data = _read(key.fileobj)
                    if data is None:
                        continue
                    if data == b"":
                        dead = True
                    elif key.fileobj is self.status:
                        status, ended = _end_status(data, job_id)
                    elif key.fileobj is self.proc.stdout:
                        lines.feed(data)
                    else:
                        stderr_total += len(data)
                        stderr += data[: max(0, self.stderr_cap - len(stderr))]
                if dead or lines.truncated:
                    break
                if lines.stop and grace_end is None:
                    grace_end = time.monotonic() + STOP_GRACE_S
            if ended:  # every writer of this job is gone: what it wrote is already in the pipe
                while (data := _read(self.proc.stdout)) and not (lines.stop or lines.truncated):
                    lines.feed(data)
        finally:
            sel.close()
        if not ended or lines.truncated or status is None:
            self.stop()  # the job is still running or the server is suspect: never reuse it
        return ChildResult(status, timed_out, lines.stop, lines.truncated, stderr_total > self.stderr_cap,
                           bytes(stderr), time.monotonic() - start)


def _read(stream) -> bytes | None:
    try:
        return os.read(stream.fileno(), CHUNK)
    except BlockingIOError:
        return None


def _end_status(data: bytes | None, job_id: int) -> tuple[int | None, bool]:
    if not data:
        return None, False
    try:
        record = json.loads(data.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, True
    if record.get("end") != job_id:
        return None, True
    code = record.get("status")
    # os.waitpid status -> Popen-style return code (negative signal number when killed)
    return (-(code & 0x7F) if code & 0x7F else code >> 8) if isinstance(code, int) else None, True
