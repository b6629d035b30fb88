"""What the local Ray cluster's own logs say, and what else keeps the machine busy, for the message of a test
that fails because of Ray."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

KILL_NOISE = ("Disconnecting client due to connection error", "exits, type=SYSTEM_ERROR", "Reporting worker exit")
"""What Ray logs for every worker a test SIGKILLs: nothing to explain."""


def ray_complaints(lines: int = 12) -> str:
    """The last warnings and errors of the local raylet and GCS, oldest first (for a failure Ray's state explains)."""
    logs = Path(tempfile.gettempdir()) / "ray" / "session_latest" / "logs"
    found = [line for name in ("raylet.out", "gcs_server.out") if (logs / name).is_file()
             for line in (logs / name).read_text(errors="replace").splitlines()
             if re.match(r"\[\S+ \S+ [EWF] ", line) and not any(noise in line for noise in KILL_NOISE)]
    found.sort()  # by the timestamp each line starts with
    return "\n".join([*(found[-lines:] or [f"no warning or error in {logs}"]), busiest()])


def busiest(count: int = 6) -> str:
    """The load average and the busiest processes with their niceness: Ray starts its workers at nice 15, so any
    busy process at nice 0 can starve a worker that is starting."""
    top = subprocess.run(["ps", "-eo", "pid,ni,pcpu,etimes,args", "--sort=-pcpu"], capture_output=True, text=True)
    rows = [line[:160] for line in top.stdout.splitlines()[:count + 1]]
    return "\n".join([f"load average {os.getloadavg()}", *rows])
