"""DARE's run record of an lm-eval run: one run directory per task (run.json + samples.jsonl), so
``dare-leaderboard`` shows lm-eval's scores beside dare-eval's.

lm-eval computes the scores; DARE records what decoded them. The record is rebuilt from the results and samples
files lm-eval's CLI writes (:func:`read_output`): the model args
resolve the same :class:`~.session.Session` again (no weights load) and each task's ``generation_kwargs`` its
DecodingConfig (a generate_until task; a likelihood-scored one is left to lm-eval's own output, as run.json has
no place for a scoring estimator yet). Each metric is the mean of lm-eval's per-document values with DARE's
bootstrap interval; the benchmark is the task (its lm-eval version, its data as lm-eval's document hashes, its
prompt as lm-eval's ``doc_to_text``), scored by ``lm-eval`` at its version with the task's metric list.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dare.harness import config as cfg
from dare.harness.metrics import summarize
from dare.harness.records import BenchmarkInfo, MetricValue, sha256_text
from dare.harness.rundir import new_run_dir, write_run
from dare.harness.runner import EvalPlan, build_record

from .lm_eval_model import model_settings, task_settings
from .session import Session

log = logging.getLogger(__name__)


def write_records(results: dict[str, Any], samples: dict[str, list[dict[str, Any]]], command: list[str]) -> list[Path]:
    """A run directory per task of an lm-eval run of the ``dare`` model (none for another model)."""
    config = results.get("config", {})
    if config.get("model") != "dare":
        return []
    model_args = config.get("model_args") or {}
    if isinstance(model_args, str):
        from lm_eval.utils import simple_parse_args_string

        model_args = simple_parse_args_string(model_args)
    session = Session(model_settings(model_args, config.get("batch_size")), source="--model_args")
    written = []
    for task in results.get("results", {}):
        if task not in samples:
            continue
        if results.get("configs", {}).get(task, {}).get("output_type") != "generate_until":
            # run.json records a decoding and its decoder; a scoring estimator has no place in it yet
            log.info("dare: no run record for %s (a likelihood-scored task; lm-eval's own output has it)", task)
            continue
        written.append(_write_task(session, task, results, samples[task], command))
    return written


def _write_task(session: Session, task: str, results: dict[str, Any], rows: list[dict[str, Any]],
                command: list[str]) -> Path:
    created = datetime.now(timezone.utc)
    task_config = results.get("configs", {}).get(task, {})
    run = session.decoding(task_settings(dict(task_config.get("generation_kwargs") or {})))
    plan = EvalPlan(suite=cfg.SuiteSpec(name=task, benchmarks=[task]), decoding=run.config, engine=session.engine,
                    model_name=session.model_name, out_dir=session.out, cache_dir=session.out / ".cache",
                    flags=["lm-eval"], command=command, decoder=run.decoder, decoder_options=run.options,
                    decoding_fields=run.fields)
    run_dir = new_run_dir(session.out, task, session.model_name, run.config.config_hash(), created)
    info = _benchmark(task, results, task_config, rows)
    metrics = _metrics(rows)
    record = build_record(plan, run_dir, "complete", created, {task: info}, session.engine.model_info(),
                          {task: metrics}, {task: {"scored": len({r["doc_id"] for r in rows})}}, {}, {})
    write_run(run_dir, record, [_row(task, r) for r in rows])
    return run_dir


def _benchmark(task: str, results: dict[str, Any], task_config: dict[str, Any], rows: list[dict]) -> BenchmarkInfo:
    import lm_eval

    n = results.get("n-samples", {}).get(task, {})
    dataset = task_config.get("dataset_kwargs", {}).get("data_files") or task_config.get("dataset_name") or ""
    doc_hashes = sorted({str(r.get("doc_hash", r["doc_id"])) for r in rows})
    prompt = json.dumps(task_config.get("doc_to_text"), sort_keys=True, default=str)
    return BenchmarkInfo(
        name=task, version=str(results.get("versions", {}).get(task, "")),
        data_file=f"{task_config.get('dataset_path', '')}:{json.dumps(dataset, default=str)}",
        data_sha256=sha256_text("\n".join(doc_hashes)), n_total=int(n.get("original", len(doc_hashes))),
        n_used=int(n.get("effective", len(doc_hashes))), prompt_template="lm-eval:doc_to_text",
        prompt_template_hash=sha256_text(prompt)[:16], verifier="lm-eval", verifier_version=lm_eval.__version__,
        verifier_args={"metric_list": task_config.get("metric_list", [])})


def _metrics(rows: list[dict[str, Any]]) -> dict[str, MetricValue]:
    """Each lm-eval metric (``name`` under the ``none`` filter, else ``name,filter``) over its documents."""
    values: dict[str, list[float]] = {}
    for row in rows:
        for metric in row.get("metrics", []):
            if isinstance(row.get(metric), (int, float)):
                key = metric if row.get("filter", "none") == "none" else f"{metric},{row['filter']}"
                values.setdefault(key, []).append(float(row[metric]))
    return {name: summarize(v) for name, v in values.items()}


def _row(task: str, row: dict[str, Any]) -> dict[str, Any]:
    """A samples.jsonl row in the native runner's shape (``score``: the first metric's value)."""
    scores = {m: row[m] for m in row.get("metrics", []) if m in row}
    first = next(iter(scores.values()), 0.0)
    context = row.get("arguments", {}).get("gen_args_0", {}).get("arg_0", "")
    resps = row.get("resps") or [[""]]
    filtered = row.get("filtered_resps") or [""]
    return {"benchmark": task, "id": str(row["doc_id"]), "index": 0,
            "messages": [{"role": "user", "content": context}], "reference": row.get("target"),
            "completion": resps[0][0] if resps and resps[0] else "", "answer": filtered[0],
            "passed": bool(first), "score": float(first) if isinstance(first, (int, float)) else 0.0,
            "status": "scored", "details": {"filter": row.get("filter", "none"), **scores}, "nfe": None,
            "nfe_official": None, "finish_reason": "stop"}


def read_output(output_path: Path, since: float) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]] | None:
    """The newest results file lm-eval's CLI wrote under ``output_path`` after ``since`` (a timestamp) and its
    tasks' samples files; None when there is none."""
    found = sorted((p for p in output_path.rglob("results_*.json") if p.stat().st_mtime >= since),
                   key=lambda p: p.stat().st_mtime)
    if not found:
        return None
    results_file = found[-1]
    stamp = results_file.stem.removeprefix("results_")
    results = json.loads(results_file.read_text(encoding="utf-8"))
    samples = {}
    for task in results.get("results", {}):
        path = results_file.with_name(f"samples_{task}_{stamp}.jsonl")
        if path.is_file():
            samples[task] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return results, samples
