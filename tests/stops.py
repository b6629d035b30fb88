"""Signal a real dare-eval or dare-train process at a chosen point and time how long it takes to exit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Stopped:
    returncode: int
    stdout: str
    stderr: str
    exit_s: float
    """Seconds from the first signal to the process's exit."""


def default_signals() -> None:
    """In the child (``preexec_fn``): handle SIGINT and SIGTERM as a fresh process would. Python turns SIGINT into
    KeyboardInterrupt only if it was not inherited as ignored, and a test run started in the background of a
    non-interactive shell, or a library imported by an earlier test, may leave it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _whole_session(proc: subprocess.Popen, sig: int) -> None:
    """``sig`` to every process of ``proc``'s session, as Slurm's cgroup process tracking signals a job (the
    processes a library such as Ray started included)."""
    import psutil

    for pid in psutil.pids():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getsid(pid) == proc.pid:
                os.kill(pid, sig)


def signal_when(argv: list[str], ready: Callable[[], bool], signals: Sequence[int], *, env: dict | None = None,
                after_s: float = 0.0, gap_s: float = 0.05, timeout: float = 300, session: bool = False) -> Stopped:
    """Run ``argv``; once ``ready()`` holds, wait ``after_s``, then send ``signals`` ``gap_s`` apart: to the
    process, or with ``session`` to every process of the session it starts."""
    proc = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=default_signals, start_new_session=session)
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate()
            proc.kill()
            raise AssertionError(f"the process ended (or hung) before the signal point: {proc.returncode}\n{err}")
        time.sleep(0.02)
    time.sleep(after_s)
    began = time.monotonic()
    for i, sig in enumerate(signals):
        if i:
            time.sleep(gap_s)
        if session:
            _whole_session(proc, sig)
        elif proc.poll() is None:
            proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    return Stopped(proc.returncode, out, err, time.monotonic() - began)


def jsonl_keys(directory: Path) -> list[str]:
    """The keys of every whole line of the JSONL caches under ``directory``, repeats included."""
    keys = []
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                keys.append(json.loads(line)["key"])
            except (ValueError, KeyError):
                continue
    return keys
