"""What the local Ray cluster's own logs say, for the message of a test that fails because of Ray."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path


def ray_complaints(lines: int = 12) -> str:
    """The last warnings and errors of the local raylet and GCS, oldest first (for a failure Ray's state explains)."""
    logs = Path(tempfile.gettempdir()) / "ray" / "session_latest" / "logs"
    found = [line for name in ("raylet.out", "gcs_server.out") if (logs / name).is_file()
             for line in (logs / name).read_text(errors="replace").splitlines() if re.match(r"\[\S+ \S+ [EWF] ", line)]
    found.sort()  # by the timestamp each line starts with
    return "\n".join(found[-lines:]) or f"no warning or error in {logs}"
