"""A comparison over several seeds: each run's mean over its seeds with a Student-t interval across them, and
its change from the start two ways: paired over the test samples (each sample's score averaged over the
seeds, bootstrap over samples: is the change real for *these* trainings?) and across seeds (one change per
seed, t interval: would another seed give it too?). A seed's own row, with its paired interval, stays in
the per-seed table (trainers/experiments/tables.py)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from dare.harness.metrics import bootstrap_ci

from .tables import _per_sample

PAIRED = ("accuracy", "partial_credit")

# two-sided 95% Student-t quantiles t_{0.975, df} for df = 1..30 (any statistics table, e.g. NIST/SEMATECH
# e-Handbook 1.3.6.7.2); beyond 30 the Cornish-Fisher expansion below is within 1e-3 of them
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z975 = 1.959964


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df <= len(T975):
        return T975[df - 1]
    z = Z975
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def across_seeds(values: list[float]) -> dict[str, Any]:
    """Mean of one value per seed with its 95% t interval (sample standard deviation); ``ci`` is None for
    a single seed, which says nothing about the spread."""
    mean = sum(values) / len(values)
    ci = None
    if len(values) > 1:
        half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
        ci = [mean - half, mean + half]
    return {"value": mean, "ci": ci, "n": len(values), "values": values}


def pooled_paired(runs: list[dict], base: dict, metric: str) -> dict[str, Any]:
    """Mean over the samples every seed and the start scored of (the sample's mean over seeds - start),
    with the bootstrap 95% interval over samples."""
    keys = sorted(set(base).intersection(*runs))
    diffs = [sum(run[k][metric] for run in runs) / len(runs) - base[k][metric] for k in keys]
    mean = sum(diffs) / len(diffs) if diffs else 0.0
    return {"value": mean, "ci": list(bootstrap_ci(diffs)), "n": len(diffs)}


def seed_rows(rows: list[dict[str, Any]], base: dict, comparison) -> list[dict[str, Any]]:
    """One row per comparison run that has at least one finished seed, from the per-seed ``rows``."""
    out = []
    for run in comparison.runs:
        mine = [r for r in rows if r.get("run") == run.run_name]
        if not mine:
            continue
        samples = [_per_sample(Path(r["eval_run"])) for r in mine]
        out.append({
            "name": run.run_name, "algorithm": run.algorithm, "seeds": [r["seed"] for r in mine],
            "complete": len(mine) == len(comparison.seeds),
            "metrics": {name: across_seeds([r["metrics"][name]["value"] for r in mine]) for name in mine[0]["metrics"]},
            "delta": {m: {"paired": pooled_paired(samples, base, m),
                          "across_seeds": across_seeds([r["delta"][m]["value"] for r in mine])} for m in PAIRED},
            "cpu_seconds": {"train": round(sum(r["cpu_seconds"]["train"] for r in mine), 1)},
        })
    return out


def _interval(metric: dict[str, Any], sign: str = "") -> str:
    """``mean [lo, hi]`` in percent; a single seed has no spread to show."""
    if metric["ci"] is None:
        return f"{100 * metric['value']:{sign}.1f} (1 seed)"
    lo, hi = metric["ci"]
    return f"{100 * metric['value']:{sign}.1f} [{100 * lo:{sign}.1f}, {100 * hi:{sign}.1f}]"


def seed_table(start: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """Markdown: the start, then per run the mean over seeds [t interval], each seed's accuracy, and the
    change from the start paired over samples and across seeds."""
    names = list(start["metrics"])
    accuracy = next((n for n in names if n.endswith("/accuracy")), names[0])
    head = ["run", "algorithm", "seeds", *(f"{n} (across seeds)" for n in names), f"{accuracy} per seed",
            "Δ accuracy (paired)", "Δ accuracy (across seeds)", "Δ partial credit (paired)",
            "Δ partial credit (across seeds)", "train CPU s (all seeds)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
             "| " + " | ".join([start["name"], "start", "–", *(_interval(start["metrics"][n]) for n in names), "–",
                                *["(start)"] * 4, "–"]) + " |"]
    for row in rows:
        seeds = ",".join(map(str, row["seeds"])) + ("" if row["complete"] else " (incomplete)")
        per_seed = ", ".join(f"{100 * v:.1f}" for v in row["metrics"][accuracy]["values"])
        cells = [row["name"], row["algorithm"], seeds,
                 *(_interval(row["metrics"][n]) if n in row["metrics"] else "–" for n in names), per_seed]
        for m in PAIRED:
            cells += [_interval(row["delta"][m]["paired"], "+"), _interval(row["delta"][m]["across_seeds"], "+")]
        lines.append("| " + " | ".join([*cells, f"{row['cpu_seconds']['train']:.0f}"]) + " |")
    return "\n".join(lines)
