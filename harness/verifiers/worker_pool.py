"""A small process pool whose per-job deadline is enforced by the parent.

Why not ``concurrent.futures``/``multiprocessing.Pool``: a stuck job there cannot be killed, and library
timeouts based on ``signal.alarm`` (math-verify's) only work in a main thread. Here every worker is a
fresh interpreter (``python -m dare.harness.verifiers.worker_pool``) holding one end of a socket pair.
Fresh interpreters, not fork: forking a parent that runs torch or CUDA threads can deadlock, and
multiprocessing's spawn/forkserver re-run the user's ``__main__`` script in every worker. The parent
sends one job at a time to each worker, waits on all sockets with the nearest deadline as its timeout,
SIGKILLs a worker whose job overruns and starts another in its place. A worker that dies mid-job
(segfault, OOM kill) is reported as ``crashed``: an infrastructure failure, not a job result. Its error
names the cause and the most memory the worker held (the reaped child's ``ru_maxrss``): a SIGKILL that
the pool did not send is named out of memory, and a job that hits the ``memory_mb`` cap (MemoryError) says
so while its worker stays in use.

Workers start lazily, up to ``workers``, and are kept for reuse; ``close()`` stops them. The deadline
clock of a job starts when its worker reports ready, so interpreter start-up never counts as a timeout.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from ..oom import high_water_kib

log = logging.getLogger(__name__)

_READY = "ready"
START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class JobResult:
    """Outcome of one job: ``value`` when ``ok``; otherwise ``timed_out`` or ``crashed``, or the job
    raised (``error`` set, neither flag)."""

    ok: bool
    value: Any = None
    timed_out: bool = False
    crashed: bool = False
    error: str | None = None


def _resolve(ref: str) -> Callable[..., Any]:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


class _Worker:
    def __init__(self, func_ref: str, preload: Sequence[str], memory_mb: int | None):
        parent_end, child_end = socket.socketpair()
        argv = [sys.executable, "-m", __name__, func_ref, str(child_end.fileno()), str(memory_mb or 0), *preload]
        # the kernel starts a new process's high-water mark at its parent's: what the worker's own peak hides under
        self.parent_peak_kib = high_water_kib()
        self.process = subprocess.Popen(argv, pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL)
        child_end.close()
        self.conn = Connection(parent_end.detach())
        self.ready = False

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        self.conn.close()

    def ask_to_stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass

    def stop(self) -> None:
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


class DeadlinePool:
    """Run ``func(*args)`` for many argument tuples in worker processes, each within ``timeout`` seconds.

    ``func_ref`` is ``"module:function"``, importable in a fresh interpreter; ``preload`` names modules
    each worker imports before it reports ready (heavy imports belong there, outside the deadline).
    """

    def __init__(self, func_ref: str, workers: int, timeout: float, *, preload: Sequence[str] = (),
                 memory_mb: int | None = None):
        self.func_ref = func_ref
        self.workers = max(1, int(workers))
        self.timeout = float(timeout)
        self.preload = tuple(preload)
        self.memory_mb = memory_mb
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self.replaced = 0

    def map(self, arg_tuples: Sequence[tuple]) -> list[JobResult]:
        """One :class:`JobResult` per argument tuple, in order."""
        with self._lock:
            return self._run(list(arg_tuples))

    def _run(self, jobs: list[tuple]) -> list[JobResult]:
        results: list[JobResult | None] = [None] * len(jobs)
        pending = deque(range(len(jobs)))
        busy: dict[Connection, list] = {}  # conn -> [worker, job index, deadline]
        startup_failure: str | None = None  # a worker that dies before it is ready means a broken setup
        while pending or busy:
            while pending and startup_failure:
                results[pending.popleft()] = JobResult(ok=False, crashed=True, error=startup_failure)
            while pending and len(busy) < self.workers:
                worker = self._take_idle() or _Worker(self.func_ref, self.preload, self.memory_mb)
                index = pending.popleft()
                try:
                    worker.conn.send((index, jobs[index]))
                except OSError as exc:  # the worker died: since its last job, or while starting
                    worker.kill()
                    error = f"worker unusable: {exc}" + ("" if worker.ready else " (it died while starting)")
                    results[index] = JobResult(ok=False, crashed=True, error=error)
                    if not worker.ready:
                        startup_failure = error
                    continue
                wait_s = self.timeout if worker.ready else START_TIMEOUT_S
                busy[worker.conn] = [worker, index, time.monotonic() + wait_s]
            if not busy:
                continue  # every remaining job was settled without a live worker
            nearest = min(deadline for _, _, deadline in busy.values())
            for conn in wait(list(busy), timeout=max(0.0, nearest - time.monotonic())):
                entry = busy[conn]  # type: ignore[index]
                worker, index, _ = entry
                try:
                    message = conn.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    del busy[conn]  # type: ignore[arg-type]
                    error = death(worker, self.memory_mb) + ("" if worker.ready else " while starting")
                    self._discard(worker)
                    log.warning("verifier worker: %s, on job %d", error, index)
                    results[index] = JobResult(ok=False, crashed=True, error=error)
                    if not worker.ready:
                        startup_failure = error
                    continue
                if message == _READY:
                    worker.ready = True
                    entry[2] = time.monotonic() + self.timeout
                    continue
                del busy[conn]  # type: ignore[arg-type]
                _, ok, value = message
                self._idle.append(worker)
                results[index] = JobResult(ok=True, value=value) if ok else JobResult(ok=False, error=value)
            now = time.monotonic()
            for conn, (worker, index, deadline) in list(busy.items()):
                if now >= deadline:
                    del busy[conn]
                    self._discard(worker)
                    if worker.ready:
                        results[index] = JobResult(ok=False, timed_out=True,
                                                   error=f"over the {self.timeout:g} s deadline")
                    else:
                        results[index] = JobResult(ok=False, crashed=True,
                                                   error=f"worker not ready after {START_TIMEOUT_S:g} s")
        return results  # type: ignore[return-value]

    def _take_idle(self) -> _Worker | None:
        while self._idle:
            worker = self._idle.pop()
            if worker.process.poll() is None:
                return worker
            self._discard(worker)  # died while idle (e.g. the OOM killer): not this job's fault
        return None

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        self.replaced += 1

    def close(self) -> None:
        """Stop every worker. The pool stays usable: it starts new workers on demand."""
        with self._lock:
            for worker in self._idle:  # all at once: each takes a moment to shut its interpreter down
                worker.ask_to_stop()
            for worker in self._idle:
                worker.stop()
            self._idle.clear()


def death(worker: _Worker, memory_mb: int | None) -> str:
    """Why a worker whose socket closed died, with the most memory it held (the kernel's ``ru_maxrss`` of the
    reaped child): a SIGKILL nobody here sent is how the OOM killer (or a cgroup's limit) ends a process,
    so it is named as such, not as a generic crash. ``ru_maxrss`` starts at the parent's peak when the worker
    was started (exec keeps the larger); at or under that it is only a bound, and said so."""
    process, status, usage = worker.process, None, None
    deadline = time.monotonic() + 2.0  # the socket closes a moment before the exit status is available
    while status is None and time.monotonic() < deadline:
        try:
            pid, raw, rusage = os.wait4(process.pid, os.WNOHANG)
        except ChildProcessError:
            break
        if pid:
            status, usage = os.waitstatus_to_exitcode(raw), rusage
            process.returncode = status  # reaped here: Popen must not wait for it again
        else:
            time.sleep(0.01)
    if usage is None:
        peak = "an unknown amount of memory"
    elif usage.ru_maxrss > worker.parent_peak_kib * 1.05:
        peak = f"{usage.ru_maxrss / 1024:.0f} MiB at its peak"
    else:
        peak = f"at most {usage.ru_maxrss / 1024:.0f} MiB at its peak (hidden under the starting process's own peak)"
    if status is None:
        return "worker died (exit status unknown)"
    if status == -signal.SIGKILL:
        cap = f", under a {memory_mb} MiB address-space cap" if memory_mb else ""
        return (f"worker killed by SIGKILL holding {peak}{cap}: out of memory (the kernel's OOM killer or a "
                "memory limit); use fewer workers or give the job more memory")
    if status < 0:
        return f"worker crashed ({signal.Signals(-status).name}) holding {peak}"
    return f"worker died with exit code {status} holding {peak}"


def _exit_when_orphaned(parent_pid: int) -> None:
    # A worker busy in a runaway job never reads its socket, so EOF alone would not stop it.

    while True:
        time.sleep(1.0)
        if os.getppid() != parent_pid:
            os._exit(0)


def _serve(func_ref: str, fd: int, memory_mb: int, preload: Sequence[str]) -> None:
    """Worker side: import, report ready, then answer jobs until told to stop or the parent goes away."""

    conn = Connection(fd)
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    if memory_mb:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for module in preload:
        importlib.import_module(module)
    func = _resolve(func_ref)
    conn.send(_READY)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        index, args = job
        try:
            reply = (index, True, func(*args))
        except MemoryError:  # the address-space cap: the job's fault, and the worker stays usable
            reply = (index, False, f"out of memory: the job reached the worker's cap of {memory_mb} MiB "
                                   "(memory_mb, address space)")
        except Exception as exc:  # reported to the parent; the worker stays usable
            reply = (index, False, f"{type(exc).__name__}: {exc}")
        conn.send(reply)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
