"""The ``opencompass`` engine of ``dare-eval``: a suite through OpenCompass, in-process, through DARE's runner.

``dare-eval --engine opencompass --model M --suite S`` wraps an inner DARE engine (``--set engine.via=NAME``;
default ``replay`` with ``--completions``, else ``torch``) in :class:`~.model.DareModel` and runs the suite
through :func:`dare.harness.runner.run_eval` like any engine: one process per ``--out`` (the run-directory
lock), the generation cache (a killed run resumes), the same :class:`~dare.harness.records.RunRecord`. What
OpenCompass does differently are the runner's two steps (:class:`OpenCompassSteps`): generations come from
OpenCompass's inference task (``OpenICLInferTask`` over one OpenCompass dataset per benchmark,
:func:`~.configs.dare_dataset`), whose model answers cached requests from DARE's cache and caches each new
batch; verdicts come from OpenCompass's evaluation task (``OpenICLEvalTask``), read back from its results
file. The backend is recorded as ``opencompass`` with the inner engine and OpenCompass's version;
OpenCompass's work directory (predictions, results, logs) is kept in ``<run dir>/opencompass``. Every
OpenCompass failure is raised (:class:`~dare.harness.errors.EngineError`), never logged and skipped.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from dare.harness.engine import EngineContext, GenerationRequest, declared_decoder, declared_token_identity
from dare.harness.errors import ConfigError, EngineError
from dare.harness.models import resolve
from dare.harness.options import Capabilities, capabilities
from dare.harness.records import ComponentInfo, DecodingConfig, Generation, ModelInfo, Sample, Verdict
from dare.harness.registry import engines
from dare.harness.rundir import slug
from dare.harness.runner import BenchmarkWork, EvalPlan, GenerationStore, RunSteps, Store

from . import require_opencompass

log = logging.getLogger(__name__)


class OpenCompassEngine:
    """Engine protocol (delegating to the inner engine) plus :meth:`run_steps`, the runner's steps through
    OpenCompass."""

    name = "opencompass"
    # the inner engine decides on a checkpoint (resolved in __init__); --completions goes to an inner replay
    capabilities = Capabilities(reads_completions=True, needs_checkpoint=False, decoding_defaults=True, own_steps=True,
                                declares_decoding=True)  # the inner engine's decoder and token identity

    def __init__(self, ctx: EngineContext):
        self.version = getattr(require_opencompass(), "__version__", "unknown")
        self.via = str(ctx.options.get("via") or ("replay" if ctx.completions else "torch"))
        if self.via == self.name:
            raise ConfigError("engine.via=opencompass would wrap OpenCompass in itself; "
                              "name a DARE engine (torch, replay, ...)")
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

    def run_steps(self, plan: EvalPlan) -> OpenCompassSteps:
        """The runner's generate and verify steps through OpenCompass's tasks."""
        return OpenCompassSteps(self, plan)


class OpenCompassSteps(RunSteps):
    """Generations through OpenCompass's inference task, verdicts through its evaluation task.

    One :class:`~.model.DareModel` over the inner engine serves every benchmark of the run. Its inference runs
    over a benchmark's samples as OpenCompass renders them: requests DARE's cache holds are answered from it,
    the others go to the inner engine and each finished batch is cached before the next starts. The
    evaluation runs once a benchmark's generations are complete (in this run, or in an earlier one); an
    interrupted benchmark is verified directly by its DARE verifier (what the evaluator wraps) for the
    partial record.
    """

    streams = False  # OpenCompass's inference runs over a whole benchmark: its missing requests in one list

    def __init__(self, engine: OpenCompassEngine, plan: EvalPlan):
        from .model import DareModel

        _quiet_opencompass()
        self.backend = ComponentInfo(name=engine.name, version=engine.version, options={"via": engine.via})
        self.model = DareModel(engine=engine.inner, decoding=plan.decoding, benchmarks=plan.suite.benchmarks,
                               limit=plan.limit)
        self.model_cfg = dict(abbr=slug(plan.model_name), type=DareModel, batch_size=plan.decoding.batch_size,
                              max_out_len=plan.decoding.gen_length, run_cfg=dict(num_gpus=0))
        self.work_dir = plan.run_dir / "opencompass"
        self.inferred: set[str] = set()
        self.verdicts: dict[str, dict[str, list[Verdict]]] = {}
        self.isolation: dict[str, Any] = {}

    def _task_config(self, plan: EvalPlan, benchmark: str):
        from mmengine.config import ConfigDict

        from .configs import check_importable, dare_dataset

        dataset = dare_dataset(benchmark, plan.limit, plan.verifier_options_for(benchmark))
        # an inferencer makes its default output folder (./icl_inference_output) in the user's working directory
        # when built; the task writes its predictions under work_dir whatever this says
        dataset["infer_cfg"]["inferencer"]["output_json_filepath"] = str(self.work_dir / "predictions")
        task_cfg = ConfigDict(models=[self.model_cfg], datasets=[[dataset]], work_dir=str(self.work_dir),
                              eval=dict(runner=dict(task=dict(dump_details=True))))
        check_importable(task_cfg)
        return task_cfg, dataset["abbr"]

    def generate(self, plan: EvalPlan, work: BenchmarkWork, todo: list[GenerationRequest], store: Store,
                 generations: GenerationStore) -> None:
        self._infer(plan, work, generations, store)

    def _infer(self, plan: EvalPlan, work: BenchmarkWork, generations: GenerationStore, store: Store | None) -> None:
        from opencompass.tasks import OpenICLInferTask

        ours = {(r.sample_id, r.index): r for r in work.requests}

        def native(request: GenerationRequest) -> GenerationRequest:
            """The runner's request for one of DareModel's: the same prompt, or the cache would mix them up."""
            mine = ours.get((request.sample_id, request.index))
            if mine is None or mine.prompt_hash != request.prompt_hash:
                raise EngineError(f"OpenCompass rendered the prompt of {request.sample_id} differently from DARE's "
                                  f"template for {work.spec.name}; generations are not cached under another prompt")
            return mine

        def cached(request: GenerationRequest) -> Generation | None:
            return generations.get(native(request))

        def keep(requests: list[GenerationRequest], outputs: list[Generation]) -> None:
            if store is None:
                raise EngineError(f"OpenCompass asked for generations of {work.spec.name} that the cache lacks")
            store([native(r) for r in requests], outputs)

        task_cfg, _ = self._task_config(plan, work.spec.name)
        self.model.serve_from(cached, keep)
        OpenICLInferTask(task_cfg).run(cur_model=self.model, cur_model_abbr=self.model_cfg["abbr"])
        self.inferred.add(work.spec.name)

    def verify(self, plan: EvalPlan, work: BenchmarkWork, verifier: Any, items: list[tuple[Sample, Generation]],
               generations: GenerationStore) -> list[Verdict]:
        name = work.spec.name
        if name not in self.verdicts:
            if not all(r in generations for r in work.requests):  # interrupted: no complete predictions to evaluate
                return super().verify(plan, work, verifier, items, generations)
            if name not in self.inferred:  # all cached before this run: OpenCompass's inference reads them back
                self._infer(plan, work, generations, None)
            self.verdicts[name] = self._evaluate(plan, work)
        return [self.verdicts[name][sample.id][gen.index] for sample, gen in items]

    def _evaluate(self, plan: EvalPlan, work: BenchmarkWork) -> dict[str, list[Verdict]]:
        from opencompass.tasks import OpenICLEvalTask

        task_cfg, abbr = self._task_config(plan, work.spec.name)
        OpenICLEvalTask(task_cfg).run()
        result = _read_result(self.work_dir / "results" / self.model_cfg["abbr"] / f"{abbr}.json", work.spec.name)
        if result.get("dare_isolation"):
            self.isolation[work.spec.name] = _first(result["dare_isolation"])
        return _verdicts(result, work, plan.decoding.num_samples, work.spec.name)

    def describe(self, work: BenchmarkWork, verifier: Any) -> dict[str, Any]:
        return self.isolation.get(work.spec.name) or verifier.describe()


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
        raise EngineError(f"OpenCompass wrote no results for {benchmark} ({path} is missing); "
                          f"see {path.parents[2] / 'logs'}")
    result = json.loads(path.read_text())
    if "error" in result or "details" not in result:
        raise EngineError(f"OpenCompass could not score {benchmark}: "
                          f"{result.get('error', 'no per-sample details')} ({path})")
    return result


def _verdicts(result: dict, work: BenchmarkWork, k: int, benchmark: str) -> dict[str, list[Verdict]]:
    """Per sample id, its k verdicts (in request order), from the evaluator's details."""
    by_id = {}
    for detail in result["details"]:
        ids, verdicts = detail["id"], detail["verdicts"]
        sample_id = ids[0] if isinstance(ids, list) else ids  # OpenCompass flattens details into lists
        if verdicts and isinstance(verdicts[0], list):
            verdicts = verdicts[0]
        by_id[sample_id] = [Verdict.model_validate(v) for v in verdicts]
    missing = [s.id for s in work.samples if len(by_id.get(s.id, ())) != k]
    if missing:
        raise EngineError(f"OpenCompass returned no verdicts for {len(missing)} sample(s) of {benchmark}: "
                           f"{', '.join(missing[:5])}")
    return by_id
