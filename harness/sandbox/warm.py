"""The parent's side of a worker slot's zygote: one warm bubblewrap sandbox whose jobs are fresh process trees.

Starting bubblewrap and an interpreter costs more than most HumanEval/MBPP tests take, so each slot keeps
one sandbox running ``zygote.serve``: a clean process that imported only trusted code and never receives
a payload. Per job the parent creates three new pipes (payload, results, stderr) and hands the job's ends
to the zygote over the control socket; the zygote forks them into a new pid/mount/IPC/UTS namespace as
the slot uid. So a job has its own channel (nothing written by an earlier job can reach it: that job's
pipes are gone), its own /tmp, /dev/shm and IPC objects, and is killed whole by the kernel when its pid 1
ends. The job's end is the zygote's ``end`` report plus EOF on both pipes (no writer is left).

The slot sandbox is retired (killed whole, restarted on the next job) after a missed deadline, an output
flood, a job the zygote did not kill within :data:`STOP_GRACE_S`, any control-protocol surprise, and
whenever the caller reports a protocol violation (:meth:`Zygote.stop`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time

from ..errors import SandboxError
from .isolation import PYTHON_ENV
from .launcher import ChildResult, Clock, Pump, kill_group

log = logging.getLogger(__name__)
STOP_GRACE_S = 1.0
START_TIMEOUT_S = 60.0


class Zygote:
    """One slot's zygote sandbox. Not thread-safe: a slot runs one job at a time."""

    def __init__(self, argv: list[str], tmp_size: int, stdout_cap: int, stderr_cap: int):
        self.argv, self.tmp_size, self.stdout_cap, self.stderr_cap = argv, tmp_size, stdout_cap, stderr_cap
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self.report: dict | None = None
        self.jobs = self.starts = 0

    def start(self) -> dict:
        """Start the sandbox; returns the zygote's self-test report (the confinement a job gets)."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen([*self.argv, "zygote", str(child.fileno()), str(self.tmp_size)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     pass_fds=(child.fileno(),), start_new_session=True, env=dict(PYTHON_ENV))
        child.close()
        self.ctl, self.starts = parent, self.starts + 1
        parent.settimeout(START_TIMEOUT_S)
        try:
            message = parent.recv(1 << 16)
        except OSError:
            message = b""
        parent.settimeout(None)
        if not message.startswith(b"ready "):
            kill_group(self.proc)
            self.proc.wait()
            detail = self._stderr()
            self.stop()
            raise SandboxError("the sandbox zygote did not start: " + detail)
        self.report = json.loads(message[6:])
        return self.report

    def _stderr(self) -> str:
        try:
            return (self.proc.stderr.read(2000) if self.proc and self.proc.stderr else b"").decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def stop(self) -> None:
        """Retire the sandbox: bwrap dies, its pid namespace (zygote and any job) goes with it."""
        if self.proc is not None:
            kill_group(self.proc)
            self.proc.wait()
            if self.proc.stderr:
                self.proc.stderr.close()
            self.proc = None
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None

    def ensure_started(self) -> None:
        """Start (or restart) the sandbox before a job's clock starts: its start-up is never the job's time."""
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self.start()

    def run(self, payload: bytes, clock: Clock, on_line) -> ChildResult:
        """Run one job; retires the sandbox itself whenever the job did not end cleanly."""
        self.ensure_started()
        self.jobs += 1
        job_id = f"{self.starts}.{self.jobs}"
        payload_r, payload_w = os.pipe()
        result_r, result_w = os.pipe()
        err_r, err_w = os.pipe()
        end: dict = {}
        try:
            socket.send_fds(self.ctl, [f"run {job_id}".encode()], [payload_r, result_w, err_w])
        except OSError:
            end["dead"] = True
        finally:
            for fd in (payload_r, result_w, err_w):
                os.close(fd)  # only the job holds them now: EOF on ours means every writer is gone

        def on_ctl() -> None:
            try:
                words = self.ctl.recv(256).decode().split()
            except (OSError, UnicodeDecodeError):
                words = []
            if len(words) == 3 and words[0] == "end" and words[1] == job_id and words[2].lstrip("-").isdigit():
                end["status"] = int(words[2])
            else:
                end["dead"] = True

        pump = Pump(payload, payload_w, result_r, err_r, self.stdout_cap, self.stderr_cap, on_line)
        reason = "ended" if end else pump.run(clock, lambda: bool(end), (self.ctl.fileno(), on_ctl))
        try:
            if reason == "stopped" and not end:
                self.ctl.send(f"kill {job_id}".encode())
                grace = Clock(STOP_GRACE_S)
                reason = ("stopped" if pump.run(grace, lambda: bool(end), (self.ctl.fileno(), on_ctl)) == "ended"
                          else "lost")
        except OSError:
            reason = "lost"
        finally:
            pump.close_stdin()
            os.close(result_r)
            os.close(err_r)
        if reason not in ("ended", "stopped") or "status" not in end:
            self.stop()  # the job may still be running, or the zygote is suspect: never reuse this sandbox
        status = end.get("status")
        returncode = None if status is None else (-(status & 0x7F) if status & 0x7F else status >> 8)
        if reason == "timeout":
            returncode = -9
        return ChildResult(returncode, reason == "timeout", reason == "stopped", pump.lines.truncated,
                           pump.stderr_total > self.stderr_cap, bytes(pump.stderr), time.monotonic() - clock.start)
