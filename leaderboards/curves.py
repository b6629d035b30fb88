"""Training curves of trained checkpoints, rendered at build time as inline SVG (no chart library).

A run's ``model.training`` holds either ``curve`` (a list of ``{step, reward, accuracy, ...}`` rows)
or ``metrics_path`` (a JSONL of such rows, relative to the run directory). The table gets a sparkline
beside the row; the run page gets one panel per series with axes.
"""

from __future__ import annotations

import json
import logging
from html import escape
from pathlib import Path
from typing import Any

from dare.harness.records import TrainingLink

log = logging.getLogger(__name__)

SERIES = (("reward", "#d9480f"), ("accuracy", "#1c7ed6"))
MAX_POINTS = 400


def load_curve(training: TrainingLink | None, run_dir: Path) -> list[dict[str, float]]:
    """The curve rows sorted by step; rows without a numeric step are dropped."""
    if not training:
        return []
    rows: list[Any] = [point.model_dump() for point in training.curve or []]
    metrics_path = training.metrics_path
    if not rows and metrics_path:
        path = (run_dir / metrics_path).resolve()
        if not path.is_relative_to(run_dir.resolve()):
            log.warning("training metrics_path %s of %s leaves the run directory; curve ignored", metrics_path, run_dir)
            return []
        try:
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("cannot read training curve %s: %s", path, exc)
            return []
    clean = [r for r in rows if isinstance(r, dict) and _number(r.get("step")) is not None]
    return sorted(clean, key=lambda r: r["step"])


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _points(curve: list[dict], key: str) -> list[tuple[float, float]]:
    points = [(float(r["step"]), _number(r.get(key))) for r in curve]
    points = [(x, y) for x, y in points if y is not None]
    stride = max(1, len(points) // MAX_POINTS)
    return points[::stride] + ([points[-1]] if points and (len(points) - 1) % stride else [])


def y_bounds(ys: list[float]) -> tuple[float, float]:
    """The y-axis range: the data's, or for a constant series the span from min(0, v) to max(1, v).

    Rewards and accuracies live in [0, 1], so a flat reward of 0.5 reads against 0..1 (where it sits),
    not against an invented 0.5..1.5; a flat value outside [0, 1] still gets an axis that contains 0.
    """
    y0, y1 = min(ys), max(ys)
    return (y0, y1) if y1 > y0 else (min(0.0, y0), max(1.0, y0))


def _scale(points, width, height, pad, bounds=None):
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = bounds or y_bounds(ys)
    x1 = x1 if x1 > x0 else x0 + 1
    return [(pad[0] + (x - x0) / (x1 - x0) * (width - pad[0] - pad[1]),
             height - pad[2] - (y - y0) / (y1 - y0) * (height - pad[2] - pad[3])) for x, y in points], (x0, x1, y0, y1)


def _polyline(coords, color, width=1.5) -> str:
    text = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    return f'<polyline fill="none" stroke="{color}" stroke-width="{width}" points="{text}"/>'


def sparkline(curve: list[dict], width: int = 120, height: int = 28) -> str | None:
    """Both series in one small SVG, each scaled to its own range (shape only; numbers on the run page)."""
    lines = []
    for key, color in SERIES:
        points = _points(curve, key)
        if len(points) >= 2:
            coords, _ = _scale(points[:: max(1, len(points) // 40)], width, height, (2, 2, 2, 2))
            lines.append(_polyline(coords, color, 1.2))
    if not lines:
        return None
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="training curve">{"".join(lines)}</svg>')


def curve_chart(curve: list[dict], title: str, width: int = 360, height: int = 180) -> str | None:
    """One panel per series (reward, accuracy) with step on x, min/max ticks and the last value."""
    panels = []
    for key, color in SERIES:
        points = _points(curve, key)
        if len(points) < 2:
            continue
        pad = (44, 10, 26, 22)
        coords, (x0, x1, y0, y1) = _scale(points, width, height, pad)
        bottom, right = height - pad[2], width - pad[1]
        panels.append(
            f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(key)} vs step">'
            f'<text x="{pad[0]}" y="14" font-size="12" fill="#222">{escape(title)}: {escape(key)} '
            f'(last {points[-1][1]:.3g})</text>'
            f'<line x1="{pad[0]}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>'
            f'<line x1="{pad[0]}" y1="{pad[3]}" x2="{pad[0]}" y2="{bottom}" stroke="#888"/>'
            f'<text x="{pad[0] - 4}" y="{bottom}" font-size="10" text-anchor="end" fill="#555">{y0:.3g}</text>'
            f'<text x="{pad[0] - 4}" y="{pad[3] + 8}" font-size="10" text-anchor="end" fill="#555">{y1:.3g}</text>'
            f'<text x="{pad[0]}" y="{height - 8}" font-size="10" fill="#555">step {x0:g}</text>'
            f'<text x="{right}" y="{height - 8}" font-size="10" text-anchor="end" fill="#555">{x1:g}</text>'
            f'{_polyline(coords, color)}</svg>')
    return "".join(panels) or None
