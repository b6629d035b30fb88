"""One console line per training step: step, reward, loss, seconds per step and the time left.

Library code only logs: the lines go to the ``dare.train.progress`` logger, which ``dare-train`` prints on
stderr (``--no-progress`` silences it); the full row of every step is in ``metrics.jsonl``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("dare.train.progress")


def duration(seconds: float) -> str:
    """``75.2`` -> ``"1m15s"``, ``3725`` -> ``"1h02m"``, ``8.4`` -> ``"8s"``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class StepProgress:
    """Times the steps of one process from ``start`` (the resume point) to ``total``; the ETA is the mean
    time of the steps this process ran times the steps left."""

    def __init__(self, start: int, total: int):
        self.start, self.total = start, total
        self.began = time.perf_counter()

    def line(self, done: int, row: dict[str, Any]) -> str:
        per = (time.perf_counter() - self.began) / max(1, done - self.start)
        parts = [f"step {done}/{self.total}"]
        parts += [f"{key} {row[key]:.4g}" for key in ("reward", "loss") if isinstance(row.get(key), (int, float))]
        parts += [f"{per:.1f} s/step", f"ETA {duration(per * (self.total - done))}"]
        return "  ".join(parts)

    def step(self, done: int, row: dict[str, Any]) -> None:
        log.info("%s", self.line(done, row))
