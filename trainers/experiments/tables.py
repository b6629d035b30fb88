"""The summary of a comparison: each run's test metrics with their intervals, its change from the start paired
over the same samples (bootstrap 95% interval), and CPU seconds; written as comparison.json and .md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dare.harness.metrics import bootstrap_ci
from dare.harness.records import RunRecord

from ..training.evaluate import read_eval_marker

CPU_FILE = "cpu_seconds.json"


def _per_sample(run_dir: Path) -> dict[tuple[str, str], dict[str, float]]:
    """(benchmark, sample id) -> {accuracy, partial_credit} of one generation per sample (k = 1 runs)."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    with (run_dir / "samples.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("status") != "scored":
                continue
            credit = float((row.get("details") or {}).get("partial_credit", row["score"]))
            out[(row["benchmark"], row["id"])] = {"accuracy": float(row["passed"]), "partial_credit": credit}
    return out


def paired_delta(run: dict, base: dict, metric: str) -> dict[str, Any]:
    """Mean of run - start over the samples both scored, with the paired bootstrap 95% interval."""
    keys = sorted(set(run) & set(base))
    diffs = [run[k][metric] - base[k][metric] for k in keys]
    mean = sum(diffs) / len(diffs) if diffs else 0.0
    return {"value": mean, "ci": list(bootstrap_ci(diffs)), "n": len(diffs)}


def _row(name: str, algorithm: str, eval_dir: Path, base: dict, run_dir: Path | None) -> dict[str, Any]:
    """A run's (or with ``run_dir`` None, the start's) metrics, paired change from ``base`` and CPU time."""
    record = RunRecord.model_validate_json((eval_dir / "run.json").read_text())
    metrics = {f"{bench}/{m}": v.model_dump(mode="json") for bench, ms in record.metrics.items() for m, v in ms.items()}
    samples = _per_sample(eval_dir)
    row: dict[str, Any] = {"name": name, "algorithm": algorithm, "model": record.model.name,
                           "eval_run": str(eval_dir), "metrics": metrics}
    if run_dir is not None:
        row["delta"] = {m: paired_delta(samples, base, m) for m in ("accuracy", "partial_credit")}
        spent = json.loads((run_dir / CPU_FILE).read_text()) if (run_dir / CPU_FILE).is_file() else {}
        steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
        # the logged steps: a step redone after a kill counts once
        row["cpu_seconds"] = {**spent, "train": round(sum(r.get("cpu_s", 0.0) for r in steps), 1)}
        config = json.loads((run_dir / "train_config.json").read_text())["config"]
        row["budget"] = {k: config.get(k) for k in ("steps", "prompts_per_step", "group_size", "seed")}
    return row


def comparison_rows(out: Path, label: str, baseline: Path, comparison) -> list[dict[str, Any]]:
    """One row per finished run (the start first), read from the evaluation records under ``out``."""
    base = _per_sample(baseline)
    rows = [_row(label, "start", baseline, base, None)]
    order = [run.run_name for run in comparison.runs]
    for key, run, seed in sorted(comparison.jobs(), key=lambda job: order.index(job[1].run_name)):  # seeds together
        run_dir = out / "runs" / key
        eval_dir = read_eval_marker(run_dir)
        if eval_dir is not None:
            rows.append({**_row(key, run.algorithm, eval_dir, base, run_dir), "run": run.run_name, "seed": seed})
    return rows


def comparison_tables(rows: list[dict[str, Any]], comparison) -> tuple[list[dict[str, Any]], str]:
    """(the across-seed rows, the markdown): with ``seeds``, the table over seeds first, then every seed's."""
    if comparison.seeds is None:
        return [], markdown_table(rows)
    from .seeds import seed_rows, seed_table

    across = seed_rows(rows, _per_sample(Path(rows[0]["eval_run"])), comparison)
    return across, seed_table(rows[0], across) + "\n\nEach seed:\n\n" + markdown_table(rows)


def summarise(out: Path, label: str, baseline: Path, comparison) -> dict[str, Any]:
    """comparison.json and comparison.md from the records of the runs that have finished so far; ``comparison``
    is the :class:`~.compare.Comparison` (its description, shared settings and runs)."""
    rows = comparison_rows(out, label, baseline, comparison)
    across, table = comparison_tables(rows, comparison)
    summary = {"description": comparison.description, "start": label, "train": comparison.train, "rows": rows}
    if comparison.seeds is not None:
        summary.update(seeds=comparison.seeds, across_seeds=across)
    (out / "comparison.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "comparison.md").write_text(table + "\n")
    return summary


def _pct(metric: dict[str, Any]) -> str:
    lo, hi = metric["ci"]
    return f"{100 * metric['value']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


def _signed(delta: dict[str, Any]) -> str:
    lo, hi = delta["ci"]
    return f"{100 * delta['value']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """One line per run: every test metric with its interval, the paired change from the start, CPU time."""
    names = list(rows[0]["metrics"])
    head = ["run", "algorithm", *names, "Δ accuracy (paired)", "Δ partial credit (paired)", "train CPU s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["name"], row["algorithm"], *(_pct(row["metrics"][n]) if n in row["metrics"] else "–"
                                                   for n in names)]
        if "delta" in row:
            cpu = row["cpu_seconds"].get("train")
            cells += [_signed(row["delta"]["accuracy"]), _signed(row["delta"]["partial_credit"]),
                      f"{cpu:.0f}" if cpu is not None else "–"]
        else:
            cells += ["(start)", "(start)", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
