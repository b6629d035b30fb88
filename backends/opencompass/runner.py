"""The ``opencompass`` engine of ``dare-eval``: a suite through OpenCompass, in-process, same run record.

``dare-eval --engine opencompass --model M --suite S`` wraps an inner DARE engine (``--set engine.via=NAME``;
default ``replay`` with ``--completions``, else ``torch``) in :class:`~.model.DareModel`, builds one
OpenCompass dataset per benchmark (:func:`~.configs.dare_dataset`), and runs OpenCompass's own inference
and evaluation tasks (``OpenICLInferTask``, ``OpenICLEvalTask``) in this process. The verdicts come back
from OpenCompass's results files and become the same :class:`~dare.harness.records.RunRecord` the native
runner writes (metrics recomputed from those verdicts by :mod:`dare.harness.metrics`); the backend is
recorded as ``opencompass`` with the inner engine and OpenCompass's version. OpenCompass's work directory
(predictions, results, logs) is kept in ``<run dir>/opencompass``. Every failure is raised, never logged
and skipped: a run ends with scores for every sample or with an error.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from dare.harness import config as cfg
from dare.harness import metrics as metric_lib
from dare.harness.engine import EngineContext, GenerationRequest, declared_decoder, declared_token_identity
from dare.harness.errors import ConfigError
from dare.harness.models import resolve
from dare.harness.options import Capabilities, capabilities
from dare.harness.records import ComponentInfo, DecodingConfig, Generation, ModelInfo, Verdict
from dare.harness.registry import engines
from dare.harness.runner import EvalPlan, benchmark_info, build_record, sample_row, plan_benchmark
from dare.harness.rundir import new_run_dir, slug, write_run
from dare.harness.verifiers import verifiers

from . import require_opencompass

log = logging.getLogger(__name__)


class OpenCompassEngine:
    """Engine protocol (delegating to the inner engine) plus :meth:`run_eval`, which the CLI prefers."""

    name = "opencompass"
    # the inner engine decides on a checkpoint (resolved in __init__); --completions goes to an inner replay
    capabilities = Capabilities(reads_completions=True, needs_checkpoint=False, decoding_defaults=True, own_loop=True,
                                declares_decoding=True)  # the inner engine's decoder and token identity

    def __init__(self, ctx: EngineContext):
        self.version = getattr(require_opencompass(), "__version__", "unknown")
        self.via = str(ctx.options.get("via") or ("replay" if ctx.completions else "torch"))
        if self.via == self.name:
            raise ConfigError("engine.via=opencompass would wrap OpenCompass in itself; name a DARE engine (torch, replay, ...)")
        inner_cls = engines.get(self.via)
        if capabilities(inner_cls).needs_checkpoint and ctx.model_path is None:
            resolved = resolve(ctx.model_name, None, True)  # the CLI skipped this because of needs_checkpoint=False
            ctx = replace(ctx, model_spec=resolved.spec, model_path=resolved.path)
        self.inner = inner_cls(replace(ctx, options={k: v for k, v in ctx.options.items() if k != "via"}))

    def decoding_defaults(self) -> dict:
        return self.inner.decoding_defaults() if capabilities(self.inner).decoding_defaults else {}

    def decoder(self, decoding: DecodingConfig):
        return declared_decoder(self.inner, decoding)

    def token_identity(self) -> dict:
        return declared_token_identity(self.inner)

    def model_info(self) -> ModelInfo:
        return self.inner.model_info()

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        self.inner.prepare(requests, decoding)

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        return self.inner.generate(requests, decoding)

    def run_eval(self, plan: EvalPlan) -> Path:
        """Run ``plan`` through OpenCompass's tasks and write run.json + samples.jsonl; returns the run dir."""
        from mmengine.config import ConfigDict
        from opencompass.tasks import OpenICLEvalTask, OpenICLInferTask

        from .configs import check_importable, dare_dataset
        from .model import DareModel

        _quiet_opencompass()
        created = datetime.now(timezone.utc)
        works = [plan_benchmark(cfg.benchmark(b), plan.decoding, plan.limit) for b in plan.suite.benchmarks]
        for work in works:  # refuse bad input before any compute is spent, as the native runner does
            verifiers.get(work.spec.verifier)
            self.inner.prepare(work.requests, plan.decoding)
        run_dir = plan.run_dir = new_run_dir(plan.out_dir, plan.suite.name, plan.model_name, plan.decoding.config_hash(), created)
        model = DareModel(engine=self.inner, decoding=plan.decoding, benchmarks=plan.suite.benchmarks, limit=plan.limit)
        model_cfg = dict(abbr=slug(plan.model_name), type=DareModel, batch_size=plan.decoding.batch_size,
                         max_out_len=plan.decoding.gen_length, run_cfg=dict(num_gpus=0))
        model_info = self.inner.model_info()
        started = time.monotonic()
        timing: dict[str, float] = {}
        isolation: dict = {}
        infos, metrics, counts, rows = {}, {}, {}, []
        for work in works:
            name = work.spec.name
            dataset_cfg = dare_dataset(name, plan.limit, plan.verifier_options_for(name))
            task_cfg = ConfigDict(models=[model_cfg], datasets=[[dataset_cfg]], work_dir=str(run_dir / "opencompass"),
                                  eval=dict(runner=dict(task=dict(dump_details=True))))
            check_importable(task_cfg)
            t0 = time.monotonic()
            OpenICLInferTask(task_cfg).run(cur_model=model, cur_model_abbr=model_cfg["abbr"])
            t1 = time.monotonic()
            OpenICLEvalTask(task_cfg).run()
            timing[f"{name}.generate_s"] = round(t1 - t0, 3)
            timing[f"{name}.verify_s"] = round(time.monotonic() - t1, 3)
            result = _read_result(run_dir / "opencompass" / "results" / model_cfg["abbr"] / f"{dataset_cfg['abbr']}.json", name)
            per_sample = _verdicts(result, work, plan.decoding.num_samples, name)
            metrics[name], counts[name] = metric_lib.compute(work.spec.metrics, per_sample, plan.decoding.num_samples)
            counts[name].update(generated=len(work.requests), cached=0, missing=0)
            if result.get("dare_isolation"):
                isolation[name] = _first(result["dare_isolation"])
            infos[name] = benchmark_info(plan, work)
            k = plan.decoding.num_samples
            for i, (sample, verdicts) in enumerate(zip(work.samples, per_sample)):
                for request, verdict in zip(work.requests[i * k:(i + 1) * k], verdicts):
                    rows.append(sample_row(name, sample, request, model.generations[(sample.id, request.index)], verdict))
        timing["total_s"] = round(time.monotonic() - started, 3)
        record = build_record(plan, run_dir, "complete", created, infos, model_info, metrics, counts, isolation, timing,
                              backend=ComponentInfo(name=self.name, version=self.version, options={"via": self.via}))
        write_run(run_dir, record, rows)
        return run_dir


def _quiet_opencompass() -> None:
    """OpenCompass logs every step at INFO on stdout; keep that for ``dare-eval -v`` only."""
    if log.isEnabledFor(logging.INFO):
        return
    import datasets
    from mmengine.logging import MMLogger

    datasets.disable_progress_bars()
    loggers = [logging.getLogger(n) for n in list(logging.root.manager.loggerDict) if n.startswith("opencompass")]
    if MMLogger.check_instance_created("OpenCompass"):
        loggers.append(MMLogger.get_instance("OpenCompass"))
    for logger in loggers:
        logger.setLevel(logging.WARNING)
        for handler in logger.handlers:
            handler.setLevel(logging.WARNING)


def _first(value):
    """OpenCompass wraps non-numeric evaluator results in a list (one entry per dataset replica)."""
    return value[0] if isinstance(value, list) and value else value


def _read_result(path: Path, benchmark: str) -> dict:
    if not path.is_file():
        raise RuntimeError(f"OpenCompass wrote no results for {benchmark} ({path} is missing); see {path.parents[2] / 'logs'}")
    result = json.loads(path.read_text())
    if "error" in result or "details" not in result:
        raise RuntimeError(f"OpenCompass could not score {benchmark}: {result.get('error', 'no per-sample details')} ({path})")
    return result


def _verdicts(result: dict, work, k: int, benchmark: str) -> list[list[Verdict]]:
    """Per sample (in the benchmark's order), its k verdicts, from the evaluator's details."""
    by_id = {}
    for detail in result["details"]:
        ids, verdicts = detail["id"], detail["verdicts"]
        sample_id = ids[0] if isinstance(ids, list) else ids  # OpenCompass flattens details into lists
        if verdicts and isinstance(verdicts[0], list):
            verdicts = verdicts[0]
        by_id[sample_id] = [Verdict.model_validate(v) for v in verdicts]
    missing = [s.id for s in work.samples if len(by_id.get(s.id, ())) != k]
    if missing:
        raise RuntimeError(f"OpenCompass returned no verdicts for {len(missing)} sample(s) of {benchmark}: "
                           f"{', '.join(missing[:5])}")
    return [by_id[s.id] for s in work.samples]
