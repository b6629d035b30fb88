"""The training page: per algorithm, its training curves over seeds (mean line, band from the lowest to the
highest seed), static HTML with inline SVG like the frontier pages (no script, no network).

``training/index.html`` has one section per start (base model and training suite) and in it one row per
algorithm setting: every trained run that shares the base model, the algorithm, its resolved options and
the training config except the seed is one setting, its seeds the band. Series: reward, exact accuracy of
the rollouts, the KL to the reference (``kl_ref``) and the clip fraction, each drawn where a run logged it.
A run's rows are its training log (``metrics.jsonl`` of the training run the evaluation sits in, as
``dare-train`` lays it out: ``RUN/eval/<eval run>/``), else the record's inline ``curve``.
"""

from __future__ import annotations

import json
import logging
import statistics
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from .curves import load_curve
from .frontier_page import _page, breakable, nice_ticks
from .loading import LoadedRun

log = logging.getLogger(__name__)

SERIES = (("reward", "reward", "#d9480f"), ("accuracy", "rollout accuracy", "#1c7ed6"),
          ("kl_ref", "KL to reference", "#2b8a3e"), ("clip_fraction", "clip fraction", "#7048e8"))
#: training-config fields that name or place a run but do not change what it trains
NOT_SETTINGS = frozenset({"seed", "model_label", "model_path", "save_every", "keep_checkpoints", "threads",
                          "device", "deterministic", "eval_limit", "evaluate"})
WIDTH, HEIGHT, PAD = 300, 170, (44, 10, 30, 22)  # left, right, bottom, top


@dataclass
class Setting:
    """One algorithm setting from one start: its runs (one per seed) and their logged rows."""

    start: str
    suite: str
    algorithm: str
    runs: dict[int | None, LoadedRun] = field(default_factory=dict)
    rows: dict[int | None, list[dict]] = field(default_factory=dict)


@dataclass(frozen=True)
class Band:
    """Per step: mean over the seeds that logged it, lowest and highest seed, how many seeds."""

    steps: list[float]
    mean: list[float]
    low: list[float]
    high: list[float]
    seeds: list[int]


def training_rows(run: LoadedRun) -> list[dict]:
    """The run's training log rows by step: the training run's metrics.jsonl when the evaluation sits in it
    (every logged series), else the record's curve (reward, accuracy, loss)."""
    log_file = run.directory.parent.parent / "metrics.jsonl"
    if run.directory.parent.name == "eval" and log_file.is_file():
        try:
            rows = [json.loads(line) for line in log_file.read_text(encoding="utf-8").splitlines() if line.strip()]
            return sorted((r for r in rows if isinstance(r.get("step"), int)), key=lambda r: r["step"])
        except (OSError, json.JSONDecodeError) as exc:
            log.warning("cannot read training log %s: %s; using the record's curve", log_file, exc)
    return load_curve(run.record.model.training, run.directory)


def settings(runs: list[LoadedRun]) -> list[Setting]:
    """The trained runs grouped by (start, suite, algorithm, options, config but the seed); for a seed run
    twice, the newest record. Runs without an algorithm or a logged row are left out."""
    groups: dict[str, Setting] = {}
    for run in sorted(runs, key=lambda r: r.record.created_at or ""):
        link = run.record.model.training
        if not link or not link.algorithm:
            continue
        config = {k: v for k, v in (link.config or {}).items() if k not in NOT_SETTINGS}
        key = json.dumps([link.base_model, link.algorithm, link.algorithm_config, config], sort_keys=True)
        rows = training_rows(run)
        if not rows:
            continue
        suite = str((link.config or {}).get("suite", run.record.suite))
        setting = groups.setdefault(key, Setting(link.base_model or "?", suite, link.algorithm))
        seed = (link.config or {}).get("seed")
        setting.runs[seed], setting.rows[seed] = run, rows
    return sorted(groups.values(), key=lambda s: (s.start, s.suite, s.algorithm, sorted(map(str, s.runs))))


def band(rows_by_seed: dict[int | None, list[dict]], key: str) -> Band | None:
    """The series ``key`` over seeds, per step; None when no run logged it."""
    per_step: dict[float, list[float]] = {}
    seeds = []
    for seed, rows in sorted(rows_by_seed.items(), key=lambda item: str(item[0])):
        values = [(float(r["step"]), r.get(key)) for r in rows]
        values = [(s, float(v)) for s, v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if values:
            seeds.append(seed)
        for step, value in values:
            per_step.setdefault(step, []).append(value)
    if not per_step:
        return None
    steps = sorted(per_step)
    return Band(steps, [statistics.fmean(per_step[s]) for s in steps], [min(per_step[s]) for s in steps],
                [max(per_step[s]) for s in steps], seeds)


def panel(data: Band, label: str, color: str) -> str:
    """One SVG panel: the band as a filled polygon, the mean as a line, axes with ticks."""
    left, right, bottom, top = PAD[0], WIDTH - PAD[1], HEIGHT - PAD[2], PAD[3]
    x0, x1 = min(data.steps), max(data.steps)
    y0, y1 = min(data.low), max(data.high)
    if y1 <= y0:
        y0, y1 = min(0.0, y0), max(1.0, y1)

    def sx(v: float) -> float:
        return left + (v - x0) / ((x1 - x0) or 1.0) * (right - left)

    def sy(v: float) -> float:
        return bottom - (v - y0) / (y1 - y0) * (bottom - top)

    edge = [(sx(s), sy(v)) for s, v in zip(data.steps, data.high)]
    edge += [(sx(s), sy(v)) for s, v in reversed(list(zip(data.steps, data.low)))]
    mean = " ".join(f"{sx(s):.1f},{sy(v):.1f}" for s, v in zip(data.steps, data.mean))
    ticks = "".join(
        f'<text x="{left - 4}" y="{sy(t) + 3:.1f}" font-size="10" text-anchor="end" fill="#555">{t:g}</text>'
        f'<line x1="{left}" y1="{sy(t):.1f}" x2="{right}" y2="{sy(t):.1f}" stroke="#eee"/>'
        for t in nice_ticks(y0, y1, 4) if y0 <= t <= y1)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="training-chart" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)} per step">'
            f'<text x="{left}" y="14" font-size="12" fill="#222">{escape(label)} '
            f'(last mean {data.mean[-1]:.3g})</text>{ticks}'
            f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#ced4da"/>'
            f'<polygon class="band" fill="{color}" fill-opacity="0.18" stroke="none" '
            f'points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in edge)}"/>'
            f'<polyline class="mean" fill="none" stroke="{color}" stroke-width="1.6" points="{mean}"/>'
            f'<text x="{left}" y="{HEIGHT - 10}" font-size="10" fill="#555">step {x0:g}</text>'
            f'<text x="{right}" y="{HEIGHT - 10}" font-size="10" text-anchor="end" fill="#555">{x1:g}</text></svg>')


def section(setting: Setting) -> str:
    """One algorithm setting: its seeds (each a link to its run) and one panel per logged series."""
    links = ", ".join(f'<a href="../index.html#run={escape(run.key)}">{escape(str(seed))}</a>'
                      for seed, run in sorted(setting.runs.items(), key=lambda item: str(item[0])))
    panels = "".join(panel(data, label, color) for key, label, color in SERIES
                     if (data := band(setting.rows, key)) is not None)
    return (f'<div class="training-setting"><h3>{breakable(setting.algorithm)} '
            f'<span class="seeds">seeds {links}</span></h3><div class="training-panels">{panels}</div></div>')


LEGEND = ("Each row is one algorithm setting trained from the start named above: the runs that share the "
          "algorithm, its options and the training config except the seed. The line is the mean over the seeds "
          "that logged the step, the band spans the lowest to the highest seed. Reward and rollout accuracy are "
          "the training rollouts' (temperature as configured), not the test split's.")


def write_page(site: Path, runs: list[LoadedRun]) -> dict[str, str] | None:
    """Write training/index.html; return its link for the index header (None: no trained run logged a curve)."""
    found = settings(runs)
    if not found:
        return None
    starts: dict[tuple[str, str], list[Setting]] = {}
    for setting in found:
        starts.setdefault((setting.start, setting.suite), []).append(setting)
    body = f'<p class="legend">{escape(LEGEND)}</p>\n' + "\n".join(
        f'<section class="training-start"><h2>{escape(start)} · {escape(suite)}</h2>'
        + "".join(section(s) for s in group) + "</section>"
        for (start, suite), group in sorted(starts.items()))
    (site / "training").mkdir(parents=True, exist_ok=True)
    (site / "training" / "index.html").write_text(
        _page("Training curves per algorithm", '<a href="../index.html">← leaderboard</a>', body), encoding="utf-8")
    return {"title": "training curves", "href": "training/index.html"}
