"""Config builders for OpenCompass's own CLI (``opencompass my_eval.py``) over DARE models and benchmarks::

    from mmengine.config import read_base
    with read_base():                                          # a config imports them through dare.opencompass
        from dare.opencompass import dare_datasets, dare_model
    datasets = dare_datasets("planning")                       # DARE data, prompts and verifiers
    models = [dare_model("torch", "tiny-llada")]

Types are dotted paths (``dare.backends.opencompass.model.DareModel``), which OpenCompass's registries
resolve by import, in this process and in its task subprocesses alike; class objects would not survive
OpenCompass dumping the config to a file. dare-dllm must therefore be installed in the environment that
runs OpenCompass: :func:`check_importable` (and ``python -m dare.backends.opencompass``) fail loudly where
it is not, where OpenCompass's CLI would exit 0 with empty scores.
"""

from __future__ import annotations

import importlib
from typing import Any

from opencompass.openicl.icl_prompt_template import PromptTemplate
from opencompass.openicl.icl_retriever import ZeroRetriever

from dare.harness import config as cfg
from dare.harness.errors import PrerequisiteError
from dare.harness.resolve import layered
from dare.harness.rundir import slug

from .dataset import ID_COLUMN, DareBenchmarkDataset, message_columns, prompt_template
from .evaluator import DareVerifierEvaluator
from .inferencer import DareGenInferencer
from .model import DareModel
from .validate import at_config_time, check_model


def dotted(cls: type) -> str:
    """``module.Class``: a ``type`` that survives OpenCompass dumping the config to a file."""
    return f"{cls.__module__}.{cls.__qualname__}"


@at_config_time("dare_dataset")
def dare_dataset(benchmark: str, limit: int | None = None, verifier_options: dict | None = None,
                 abbr: str | None = None) -> dict[str, Any]:
    """OpenCompass dataset config of one DARE benchmark (DARE's data, prompt template and verifier)."""
    cfg.benchmark(benchmark)  # unknown names fail here, with suggestions
    return dict(
        abbr=abbr or f"dare-{benchmark}", type=dotted(DareBenchmarkDataset), benchmark=benchmark, limit=limit,
        reader_cfg=dict(input_columns=message_columns(benchmark), output_column=ID_COLUMN),
        infer_cfg=dict(prompt_template=dict(type=dotted(PromptTemplate), template=prompt_template(benchmark)),
                       retriever=dict(type=dotted(ZeroRetriever)),
                       inferencer=dict(type=dotted(DareGenInferencer), benchmark=benchmark)),
        eval_cfg=dict(evaluator=dict(type=dotted(DareVerifierEvaluator), benchmark=benchmark,
                                     options=dict(verifier_options or {}))),
    )


@at_config_time("dare_datasets")
def dare_datasets(suite: str, limit: int | None = None, verifier_options: dict | None = None) -> list[dict[str, Any]]:
    """Dataset configs of every benchmark of a DARE suite (or of one benchmark)."""
    return [dare_dataset(b, limit, verifier_options) for b in cfg.suite(suite).benchmarks]


@at_config_time("dare_model")
def dare_model(engine: str = "torch", model: str | None = None, *, abbr: str | None = None,
               decoding: dict | None = None, batch_size: int | None = None, num_gpus: int = 0,
               **options: Any) -> dict[str, Any]:
    """OpenCompass model config of a DARE engine; ``options`` go to :class:`DareModel` (model_path, suite,
    benchmarks, engine_options, completions, device, limit). Every argument is checked here, while the
    config file is read (:func:`~.validate.check_model`): a typo stops OpenCompass with one line."""
    check_model(engine, model, decoding, options)
    spec = cfg.model(model) if model and cfg.model_name(model) in cfg.names("models") else None
    settings = layered(spec, options.get("suite") or "default", decoding, source="dare_model decoding")
    return dict(
        abbr=abbr or slug(f"dare-{engine}-{model or 'model'}"), type=dotted(DareModel), engine=engine, model=model,
        decoding=dict(decoding or {}), batch_size=batch_size or settings.batch_size,
        max_out_len=settings.gen_length, run_cfg=dict(num_gpus=num_gpus), **options,
    )


def check_importable(config: Any) -> None:
    """Import every dotted ``type`` in an OpenCompass config; one line naming the first that fails.

    OpenCompass's task subprocesses resolve these strings by import and, when one fails, log it and exit 0
    with empty scores: check before launching instead.
    """
    for where, value in _types(config, "config"):
        if not isinstance(value, str) or "." not in value:
            continue
        module, _, attr = value.rpartition(".")
        try:
            getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise PrerequisiteError(f"{where}.type {value!r} cannot be imported ({exc}); install the package that "
                                    "defines it in this environment (dare-dllm: pip install -e .) "
                                    "or fix the name") from None


def _types(node: Any, where: str):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "type":
                yield where, value
            else:
                yield from _types(value, f"{where}.{key}")
    elif isinstance(node, (list, tuple)):
        for i, item in enumerate(node):
            yield from _types(item, f"{where}[{i}]")
