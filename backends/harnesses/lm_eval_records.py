"""DARE's run record of an lm-eval run: one run directory per task (run.json + samples.jsonl), so
``dare-leaderboard`` shows lm-eval's scores beside dare-eval's.

lm-eval computes the scores; DARE records what produced them. The record is rebuilt from the results and samples
files lm-eval's CLI writes (:func:`read_output`): the model args resolve the same :class:`~.session.Session`
again (no weights load). A ``generate_until`` task records the DecodingConfig its ``generation_kwargs`` resolve
to; a ``multiple_choice`` or ``loglikelihood`` task records the scoring estimator (name, version, options) and
its contexts' few-shot settings, as a dare-eval choice benchmark does, so the leaderboard keys its column by
the estimator. A ``loglikelihood_rolling`` task gets no record: its perplexities are corpus aggregates with no
per-document value to put an interval on. Each metric is the mean of lm-eval's per-document values with DARE's
bootstrap interval; the benchmark is the task (its lm-eval version, its data as lm-eval's document hashes, its
prompt as lm-eval's ``doc_to_text`` and ``doc_to_choice``), scored by ``lm-eval`` at its version with the task's
metric list.
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
from .lm_eval_rows import generated_row, metric_values, scored_row
from .session import Session

log = logging.getLogger(__name__)


#: lm-eval output types DARE records, and how a logged sample becomes a samples.jsonl row
ROWS = {"generate_until": generated_row, "multiple_choice": scored_row, "loglikelihood": scored_row}


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
        kind = results.get("configs", {}).get(task, {}).get("output_type")
        if task not in samples:
            continue
        if kind not in ROWS:
            log.info("dare: no run record for %s (%s: perplexities are corpus aggregates)", task, kind)
            continue
        written.append(_write_task(session, task, results, samples[task], command))
    return written


def _write_task(session: Session, task: str, results: dict[str, Any], rows: list[dict[str, Any]],
                command: list[str]) -> Path:
    created = datetime.now(timezone.utc)
    task_config = results.get("configs", {}).get(task, {})
    to_row = ROWS[task_config["output_type"]]
    scored = to_row is scored_row
    # a scored task decodes nothing: its record holds the user's settings (the seed each request is drawn from)
    run = session.decoding({} if scored else task_settings(dict(task_config.get("generation_kwargs") or {})))
    plan = EvalPlan(suite=cfg.SuiteSpec(name=task, benchmarks=[task]), decoding=run.config, engine=session.engine,
                    model_name=session.model_name, out_dir=session.out, cache_dir=session.out / ".cache",
                    flags=["lm-eval"], command=command, decoder=run.decoder, decoder_options=run.options,
                    decoding_fields=run.fields)
    run_dir = new_run_dir(session.out, task, session.model_name, run.config.config_hash(), created)
    info = _benchmark(task, results, task_config, rows)
    if scored:
        info = info.model_copy(update={"estimator": session.estimator().component(),
                                       "fewshot": _fewshot(task, results, task_config)})
    metrics = _metrics(rows)
    record = build_record(plan, run_dir, "complete", created, {task: info}, session.engine.model_info(),
                          {task: metrics}, {task: {"scored": len({r["doc_id"] for r in rows})}}, {}, {})
    write_run(run_dir, record, [to_row(task, r) for r in rows])
    return run_dir


def _benchmark(task: str, results: dict[str, Any], task_config: dict[str, Any], rows: list[dict]) -> BenchmarkInfo:
    import lm_eval

    n = results.get("n-samples", {}).get(task, {})
    dataset = task_config.get("dataset_kwargs", {}).get("data_files") or task_config.get("dataset_name") or ""
    doc_hashes = sorted({str(r.get("doc_hash", r["doc_id"])) for r in rows})
    prompt = json.dumps({k: task_config.get(k) for k in PROMPT_KEYS}, sort_keys=True, default=str)
    return BenchmarkInfo(
        name=task, version=str(results.get("versions", {}).get(task, "")),
        data_file=f"{task_config.get('dataset_path', '')}:{json.dumps(dataset, default=str)}",
        data_sha256=sha256_text("\n".join(doc_hashes)), n_total=int(n.get("original", len(doc_hashes))),
        n_used=int(n.get("effective", len(doc_hashes))), prompt_template="lm-eval:doc_to_text",
        prompt_template_hash=sha256_text(prompt)[:16], verifier="lm-eval", verifier_version=lm_eval.__version__,
        verifier_args={"metric_list": task_config.get("metric_list", [])})


#: what a task's prompt hash covers: everything lm-eval builds a request's context and continuation from
PROMPT_KEYS = ("doc_to_text", "doc_to_choice", "description", "target_delimiter", "fewshot_delimiter")


def _fewshot(task: str, results: dict[str, Any], task_config: dict[str, Any]) -> dict[str, Any]:
    """A scored task's contexts, in the keys a dare-eval choice benchmark records them under."""
    sampler = (task_config.get("fewshot_config") or {}).get("sampler")
    return {"num_fewshot": int(results.get("n-shot", {}).get(task) or 0), "sampler": sampler,
            "seed": results.get("config", {}).get("fewshot_seed"), "split": task_config.get("fewshot_split"),
            "description": task_config.get("description", ""),
            "target_delimiter": task_config.get("target_delimiter", " "),
            "fewshot_delimiter": task_config.get("fewshot_delimiter", "\n\n")}


def _metrics(rows: list[dict[str, Any]]) -> dict[str, MetricValue]:
    """Each lm-eval metric (``name`` under the ``none`` filter, else ``name,filter``) over its documents."""
    values: dict[str, list[float]] = {}
    for row in rows:
        for metric, value in metric_values(row).items():
            if isinstance(value, (int, float)):
                key = metric if row.get("filter", "none") == "none" else f"{metric},{row['filter']}"
                values.setdefault(key, []).append(float(value))
    return {name: summarize(v) for name, v in values.items()}


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
