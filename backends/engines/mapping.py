"""Pure mappings from a :class:`DecodingConfig` to the diffusion options of lmdeploy and SGLang.

No import of either package: the functions only build plain dicts, so they are tested on any machine.
Every field that the target engine cannot express is refused with one :class:`ConfigError` that lists
all problems (nothing is silently dropped). Option names (spec models_decoding.md section 4):

- lmdeploy ``PytorchEngineConfig``: ``dllm_block_length``, ``dllm_denoising_steps``,
  ``dllm_unmasking_strategy`` (low_confidence_static | low_confidence_dynamic | sequential),
  ``dllm_confidence_threshold``; ``GenerationConfig``: ``do_sample``, ``temperature``, ``top_p``, ``top_k``,
  ``max_new_tokens``, ``ignore_eos``, ``random_seed``. SDAR dense and MoE only.
- SGLang ``Engine``: ``dllm_algorithm`` (LowConfidence | JointThreshold), ``dllm_algorithm_config``
  (LowConfidence: ``threshold``, ``block_size``; JointThreshold: ``threshold``, ``edit_threshold``,
  ``max_post_edit_steps``, ``penalty_lambda``), ``max_running_requests``; sampling params
  ``temperature``, ``max_new_tokens``, ``ignore_eos``. SGLang's algorithms propose by argmax.

Commit-rule equivalences: lmdeploy's dynamic rule and SGLang's LowConfidence commit the top-1 token plus
every token above tau; the reference SDAR/LLaDA2 dynamic rule has a floor of the step quota instead.
They coincide when the quota is one token per step (steps = gen_length), or when the config asks for
the top-1 rule explicitly (``extra.threshold_rule: top1``); any other combination is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig

LMDEPLOY_ARCHITECTURES = ("sdar", "sdar_moe")
SGLANG_ARCHITECTURES = ("sdar", "sdar_moe", "llada2_moe")
_DEFAULTS = DecodingConfig()

@dataclass(frozen=True)
class EngineOptions:
    """``engine``: constructor options of the engine; ``sampling``: per-request generation options;
    ``algorithm_config``: SGLang's dllm_algorithm_config (written to a YAML file by the engine)."""

    engine: dict[str, Any]
    sampling: dict[str, Any]
    algorithm_config: dict[str, Any] = field(default_factory=dict)


def _unused(cfg: DecodingConfig, handled: set[str], engine: str) -> list[str]:
    """A problem for every score-changing field left at a non-default value that ``engine`` cannot express."""
    ignored = {"num_samples", "seed", "batch_size", "extra"} | handled  # k and seeds are the harness's job
    problems = []
    for name in DecodingConfig.model_fields:
        if name not in ignored and getattr(cfg, name) != getattr(_DEFAULTS, name):
            problems.append(f"{name}={getattr(cfg, name)!r} has no {engine} equivalent")
    return problems


def _extra(cfg: DecodingConfig, engine: str, known: set[str]) -> tuple[dict[str, Any], list[str]]:
    """(algorithm options from ``extra``, problems). Engine settings (``tp``, ``dtype``, ...) are typed
    ``--set engine.NAME=VALUE`` options, so an ``extra[engine]`` dict is refused, not passed through."""
    algo = {k: v for k, v in cfg.extra.items() if k != engine}
    problems = [f"extra option {k!r} is not understood by {engine}" for k in sorted(set(algo) - known)]
    if engine in cfg.extra:
        problems.append(f"extra.{engine}: engine options are set with --set engine.NAME=VALUE, not in extra")
    return algo, problems


def _blocks(cfg: DecodingConfig) -> tuple[int, list[str]]:
    n_blocks = cfg.gen_length // cfg.block_length
    if cfg.steps % n_blocks:
        return 0, [f"steps={cfg.steps} is not a multiple of the {n_blocks} blocks"]
    return cfg.steps // n_blocks, []


def _top1_rule_ok(cfg: DecodingConfig, per_block: int, algo: dict[str, Any], engine: str) -> list[str]:
    if per_block == cfg.block_length or algo.get("threshold_rule") == "top1":
        return []
    floor = cfg.block_length // max(per_block, 1)
    return [(f"{engine} commits the top-1 token plus all above the threshold, but steps={cfg.steps} asks for a "
             f"floor of {floor} tokens per step; set steps = gen_length or extra.threshold_rule=top1")]


def _tau(cfg: DecodingConfig, algo: dict[str, Any], default: float) -> float:
    """The dynamic rule's threshold: ``threshold``, else ``extra.confidence_threshold`` (as the torch
    block decoder reads it), else the engine's documented default."""
    return cfg.threshold if cfg.threshold is not None else algo.get("confidence_threshold", default)


LMDEPLOY_DYNAMIC = "low_confidence_dynamic"
#: remasking -> lmdeploy's dllm_unmasking_strategy (without, with a threshold): the plain rule turns
#: dynamic once a threshold is set, as the reference SDAR sampler does.
LMDEPLOY_STRATEGIES: dict[str, tuple[str, str]] = {
    "low_confidence": ("low_confidence_static", LMDEPLOY_DYNAMIC),
    "low_confidence_static": ("low_confidence_static", "low_confidence_static"),
    "low_confidence_dynamic": (LMDEPLOY_DYNAMIC, LMDEPLOY_DYNAMIC),
    "threshold": (LMDEPLOY_DYNAMIC, LMDEPLOY_DYNAMIC),
    "sequential": ("sequential", "sequential"),
}


def lmdeploy_options(cfg: DecodingConfig, architecture: str) -> EngineOptions:
    """PytorchEngineConfig and GenerationConfig keyword arguments for an SDAR model."""
    problems = [] if architecture in LMDEPLOY_ARCHITECTURES else [
        f"lmdeploy serves SDAR models only, not {architecture}; use --engine torch or sglang"]
    algo, extra_problems = _extra(cfg, "lmdeploy", {"threshold_rule", "confidence_threshold"})
    per_block, block_problems = _blocks(cfg)
    problems += extra_problems + block_problems
    problems += _unused(cfg, {"gen_length", "steps", "block_length", "remasking", "threshold", "temperature",
                              "top_p", "top_k", "stop_at_eos"}, "lmdeploy")
    strategy = LMDEPLOY_STRATEGIES.get(cfg.remasking, (None, None))[cfg.threshold is not None]
    if strategy is None:
        problems.append(f"remasking={cfg.remasking!r} has no lmdeploy unmasking strategy "
                        "(low_confidence, low_confidence_static, low_confidence_dynamic, sequential)")
    engine: dict[str, Any] = {"dllm_block_length": cfg.block_length, "dllm_denoising_steps": per_block,
                              "dllm_unmasking_strategy": strategy, "max_batch_size": cfg.batch_size}
    if strategy == LMDEPLOY_DYNAMIC:
        engine["dllm_confidence_threshold"] = _tau(cfg, algo, 0.9)
        problems += _top1_rule_ok(cfg, per_block, algo, "lmdeploy")
    else:
        if cfg.threshold is not None:
            problems.append(f"threshold={cfg.threshold} only applies to the dynamic strategy, not {strategy}")
        if per_block and cfg.block_length % per_block:
            problems.append(f"lmdeploy unmasks block_length // steps tokens per step; {cfg.block_length} tokens "
                            f"in {per_block} steps per block do not divide evenly")
    if cfg.temperature == 0 and (cfg.top_p is not None or cfg.top_k is not None):
        problems.append("top_p/top_k change nothing in lmdeploy's greedy decoding (temperature=0); drop them")
    if problems:
        raise ConfigError(problems, source="lmdeploy")
    sampling = {"do_sample": cfg.temperature > 0, "max_new_tokens": cfg.gen_length, "ignore_eos": not cfg.stop_at_eos}
    if cfg.temperature > 0:
        sampling.update(temperature=cfg.temperature, top_p=cfg.top_p or 1.0, top_k=cfg.top_k or 0)
    return EngineOptions(engine=engine, sampling=sampling)


def sglang_options(cfg: DecodingConfig, architecture: str) -> EngineOptions:
    """sglang.Engine keyword arguments, the dllm_algorithm_config dict and sampling params."""
    problems = [] if architecture in SGLANG_ARCHITECTURES else [
        f"SGLang's diffusion mode serves SDAR and LLaDA2.x, not {architecture}; use --engine torch or fastdllm"]
    known = {"threshold_rule", "confidence_threshold", "editing_threshold", "max_post_steps", "penalty_lambda"}
    algo, extra_problems = _extra(cfg, "sglang", known)
    per_block, block_problems = _blocks(cfg)
    problems += extra_problems + block_problems
    problems += _unused(cfg, {"gen_length", "steps", "block_length", "remasking", "threshold", "stop_at_eos"},
                        "SGLang (its diffusion algorithms decode greedily)")
    algorithm, build = SGLANG_ALGORITHMS.get(cfg.remasking, (None, None))
    config: dict[str, Any] = {"block_size": cfg.block_length}
    if build is None:
        problems.append(f"remasking={cfg.remasking!r} has no SGLang dllm algorithm (low_confidence, "
                        "low_confidence_static, low_confidence_dynamic, editing)")
    else:
        settings, rule_problems = build(cfg, algo, per_block)
        config.update(settings)
        problems += rule_problems
    if problems:
        raise ConfigError(problems, source="sglang")
    engine = {"dllm_algorithm": algorithm, "max_running_requests": cfg.batch_size, "trust_remote_code": True}
    sampling = {"temperature": 0.0, "max_new_tokens": cfg.gen_length, "ignore_eos": not cfg.stop_at_eos}
    return EngineOptions(engine=engine, sampling=sampling, algorithm_config=config)


def _joint_threshold(cfg: DecodingConfig, algo: dict[str, Any], per_block: int) -> tuple[dict[str, Any], list[str]]:
    """JointThreshold's dllm_algorithm_config (LLaDA2.1's editing rule); every value has a default."""
    return {"threshold": cfg.threshold if cfg.threshold is not None else 0.5,
            "edit_threshold": algo.get("editing_threshold", 0.0), "max_post_edit_steps": algo.get("max_post_steps", 16),
            "penalty_lambda": algo.get("penalty_lambda", 0)}, []


def _low_confidence(cfg: DecodingConfig, algo: dict[str, Any], per_block: int, *,
                    static: bool | None) -> tuple[dict[str, Any], list[str]]:
    """LowConfidence's config; ``static`` None: static unless a threshold is set (the plain rule)."""
    static = cfg.threshold is None if static is None else static
    problems = []
    if static and (cfg.threshold is not None or per_block != cfg.block_length):
        problems.append("SGLang expresses static unmasking only as one token per step without a threshold "
                        "(steps = gen_length, threshold unset)")
    elif not static:
        problems += _top1_rule_ok(cfg, per_block, algo, "SGLang LowConfidence")
    # one token per step is LowConfidence with a threshold nothing can exceed (it commits conf > tau)
    return {"threshold": 1.0 if static else _tau(cfg, algo, 0.95)}, problems


_Builder = Callable[[DecodingConfig, dict[str, Any], int], tuple[dict[str, Any], list[str]]]
#: remasking -> (SGLang dllm_algorithm, the builder of its dllm_algorithm_config and problems)
SGLANG_ALGORITHMS: dict[str, tuple[str, _Builder]] = {
    "editing": ("JointThreshold", _joint_threshold),
    "joint_threshold": ("JointThreshold", _joint_threshold),
    "low_confidence": ("LowConfidence", partial(_low_confidence, static=None)),
    "low_confidence_static": ("LowConfidence", partial(_low_confidence, static=True)),
    "low_confidence_dynamic": ("LowConfidence", partial(_low_confidence, static=False)),
    "threshold": ("LowConfidence", partial(_low_confidence, static=False)),
}
