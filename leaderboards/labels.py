"""Point labels of a chart placed so that no two overlap (nor a marker, nor the legend).

The page is static SVG drawn at build time, with no script to measure text, so a label's box is
estimated: labels are set in a monospace face (``FONT_FAMILY``), where every character advances about
0.6 em; ``CHAR_WIDTH`` and the box height are a little above what Chromium measures
(tests/leaderboards/test_frontier_browser.py reads the real boxes). A label first tries
the spots beside its marker, then spots ever further away in a spiral (joined to the marker by a leader
line); a label with no free spot inside the plot is left out of the chart and listed under it instead,
so overlap is never the fallback.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

FONT_SIZE = 11
FONT_FAMILY = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace"
CHAR_WIDTH = 6.9  # px per character at 11 px: monospace faces advance 0.6 em = 6.6 px
ASCENT, DESCENT = 11.0, 3.5  # px above and below the baseline (measured boxes span about 10.5 and 3)
GAP = 1.0  # px kept free between two boxes
NEAR = 12  # the first NEAR candidates sit beside the marker: no leader line

Box = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass
class Label:
    """Where a label's text goes: ``x``, ``y`` (baseline) and SVG ``anchor``; ``leader``: whether a line
    joins it to its marker (it sits away from it)."""

    x: float
    y: float
    anchor: str
    box: Box
    leader: bool


def text_width(text: str) -> float:
    """Estimated width in px: wide (East Asian) characters count twice."""
    return CHAR_WIDTH * sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def intersects(a: Box, b: Box, gap: float = GAP) -> bool:
    return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap


def _box(x: float, y: float, anchor: str, width: float) -> Box:
    x0 = {"start": x, "end": x - width, "middle": x - width / 2}[anchor]
    return (x0, y - ASCENT, x0 + width, y + DESCENT)


def _candidates(x: float, y: float, width: float, frame: Box):
    """(text x, baseline y, anchor): beside the marker first, then a spiral outwards over the plot."""
    for dy in (4, -10, 18, -24, 32):
        yield x + 9, y + dy, "start"
        yield x - 9, y + dy, "end"
    yield x, y - 10, "middle"
    yield x, y + 19, "middle"
    reach = math.hypot(frame[2] - frame[0], frame[3] - frame[1])
    ring = 1
    while ring * 10 < reach:
        steps = 8 * ring
        for k in range(steps):
            angle = 2 * math.pi * k / steps
            cx, cy = x + ring * 10 * math.cos(angle) * 1.6, y + ring * 10 * math.sin(angle)
            yield cx, cy + ASCENT / 2, "middle"
        ring += 1


class LabelPlacer:
    """Places labels one at a time inside ``frame``, never over an ``obstacles`` box or an earlier label."""

    def __init__(self, frame: Box, obstacles: list[Box]):
        self.frame = frame
        self.taken: list[Box] = list(obstacles)

    def place(self, text: str, x: float, y: float) -> Label | None:
        """The first free spot for ``text`` near the marker at (x, y); None when the plot has none."""
        width = text_width(text)
        x0, y0, x1, y1 = self.frame
        for index, (tx, ty, anchor) in enumerate(_candidates(x, y, width, self.frame)):
            box = _box(tx, ty, anchor, width)
            if box[0] < x0 or box[2] > x1 or box[1] < y0 or box[3] > y1:
                continue
            if any(intersects(box, other) for other in self.taken):
                continue
            self.taken.append(box)
            return Label(tx, ty, anchor, box, leader=index >= NEAR)
        return None


def leader_end(box: Box, x: float, y: float) -> tuple[float, float]:
    """The point of ``box`` nearest to the marker at (x, y), where a leader line ends."""
    return min(max(x, box[0]), box[2]), min(max(y, box[1]), box[3])
