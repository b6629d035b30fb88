"""What the serving engines (lmdeploy, SGLang) declare: typed ``--set engine.X`` options with their token
identity, and per ``remasking`` the DecodingConfig fields read, the typed ``extra`` and the commit rule.

Declarations only, no import of either package: the plan validates, records and keys a run with these
before any engine starts (:mod:`.mapping` then turns the settings into the engines' own arguments).
Execution-only options (memory fractions) are recorded but leave the generation cache key alone; every
other option can change tokens (tensor parallelism changes reduction order, dtype, KV quantisation,
attention kernels, CUDA graphs, chunked prefill).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, create_model, field_validator

from dare.harness.options import NoOptions, Options


class LmdeployOptions(Options):
    """``--set engine.X`` for lmdeploy's ``PytorchEngineConfig``; None leaves lmdeploy's own default."""

    execution_only = frozenset({"cache_max_entry_count"})
    tp: int = Field(1, ge=1)
    dtype: Literal["auto", "float16", "bfloat16"] = "auto"
    quant_policy: Literal[0, 4, 8] = 0
    session_len: int | None = Field(None, ge=1)
    max_prefill_token_num: int | None = Field(None, ge=1)
    eager_mode: bool | None = None
    cache_max_entry_count: float | None = Field(None, gt=0, le=1)


class SglangOptions(Options):
    """``--set engine.X`` for ``sglang.Engine``; None leaves SGLang's own default."""

    execution_only = frozenset({"mem_fraction_static"})
    tp_size: int = Field(1, ge=1)
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    attention_backend: str | None = None
    disable_cuda_graph: bool | None = None
    cuda_graph_max_bs: int | None = Field(None, ge=1)
    chunked_prefill_size: int | None = None
    mem_fraction_static: float | None = Field(None, gt=0, lt=1)


def engine_kwargs(options: Options) -> dict:
    """The options set (None: the engine's default) as constructor keyword arguments."""
    return {k: v for k, v in options.model_dump().items() if v is not None}


# remasking -> the DecodingConfig fields the engine reads with it (besides num_samples and batch_size), as
# :mod:`.mapping` uses them: the plan refuses any other field a caller sets (dare.harness.plan)
_SHARED = frozenset({"gen_length", "steps", "block_length", "remasking", "stop_at_eos"})
_LMDEPLOY_BASE = _SHARED | {"temperature", "top_p", "top_k", "seed"}  # seed: a sampled request's random_seed
LMDEPLOY_READS = {"low_confidence": _LMDEPLOY_BASE | {"threshold"}, "low_confidence_static": _LMDEPLOY_BASE,
                  "low_confidence_dynamic": _LMDEPLOY_BASE | {"threshold"}, "threshold": _LMDEPLOY_BASE | {"threshold"},
                  "sequential": _LMDEPLOY_BASE}
SGLANG_READS = {"low_confidence": _SHARED | {"threshold"}, "low_confidence_static": _SHARED,  # greedy only
                "low_confidence_dynamic": _SHARED | {"threshold"}, "threshold": _SHARED | {"threshold"},
                "editing": _SHARED | {"threshold"}, "joint_threshold": _SHARED | {"threshold"}}
#: what ``threshold`` means in both engines' dynamic rules (lmdeploy's low_confidence_dynamic, SGLang's LowConfidence)
THRESHOLD_TOP1 = "commit the most confident masked position plus every masked position with confidence above threshold"
THRESHOLD_JOINT = ("SGLang's JointThreshold: mask-to-token commits above threshold (default 0.5); "
                   "extra.editing_threshold governs re-editing decoded tokens")


def _moved(cls, value):
    raise ValueError("engine options are typed: set them with --set engine.NAME=VALUE, not in extra")


def _refusing(engine: str, base: type[Options]) -> type[Options]:
    """``base`` plus an ``extra.<engine>`` key refused with its fix (it held the engine options before they
    were typed); excluded from the record."""
    return create_model(f"{engine.capitalize()}{base.__name__}", __base__=base,
                        __validators__={"refuse": field_validator(engine, mode="before")(_moved)},
                        **{engine: (None, Field(None, exclude=True))})


class DynamicExtra(Options):
    """``extra`` of the engines' dynamic strategies: ``confidence_threshold`` (tau when ``threshold`` is
    unset) and ``threshold_rule`` (``top1`` accepts the engines' top-1 rule where the step quota is above one;
    :mod:`.mapping`)."""

    threshold_rule: Literal["quota", "top1"] = "quota"
    confidence_threshold: float = 0.9


class SglangDynamicExtra(DynamicExtra):
    confidence_threshold: float = 0.95  # SGLang LowConfidence's default


class JointExtra(Options):
    """``extra`` of SGLang's JointThreshold (editing): its dllm_algorithm_config keys."""

    editing_threshold: float = 0.0
    max_post_steps: int = 16
    penalty_lambda: float = 0.0


def _declarations(engine: str, reads: dict[str, frozenset[str]], extra_for) -> dict:
    """remasking -> (fields read, typed ``extra``, rules): what ``ExternalEngine.decoder`` declares."""
    out = {}
    for name, fields in reads.items():
        extra, rule = extra_for(name) if "threshold" in fields else (NoOptions, None)
        out[name] = (fields, _refusing(engine, extra), {"threshold": rule} if rule else {})
    return out


LMDEPLOY_DECODERS = _declarations("lmdeploy", LMDEPLOY_READS, lambda name: (DynamicExtra, THRESHOLD_TOP1))
SGLANG_DECODERS = _declarations("sglang", SGLANG_READS, lambda name: (
    (JointExtra, THRESHOLD_JOINT) if name in ("editing", "joint_threshold") else (SglangDynamicExtra, THRESHOLD_TOP1)))
