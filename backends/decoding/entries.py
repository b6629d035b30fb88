"""Registered decoders: ``decode(model, canvas, cfg, gens) -> DecodeResult``, one per family and strategy.

Registry names are ``<decoding family>:<remasking>``; a model's architecture declares its family
(``mdm`` for LLaDA, ``dream`` for Dream, ``block`` for SDAR and LLaDA2.x). Each decoder declares the
DecodingConfig fields it reads (``decode.reads``) and the model of its ``extra`` options
(``decode.Options``): the plan refuses a setting the chosen decoder ignores, so two configs hash alike
exactly when they decode alike. The sets are static per decoder (e.g. ``top_p`` counts as read even at
temperature 0, where argmax ignores it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dare.harness.options import Options

from . import block, dpad, dream, llada, pc_sampler
from .common import FACTOR, THRESHOLD_FLOOR, THRESHOLD_QUOTA, THRESHOLD_TOP1
from .klass import decode_klass
from .block import decode_blocks
from .mdm import decode_masked_diffusion

COMMON = frozenset({"gen_length", "steps", "block_length", "remasking", "temperature", "top_p", "top_k", "seed",
                    "stop_at_eos"})


class DecoderOptions(Options):
    """``extra`` options every torch decoder reads."""

    record_trajectory: bool = False
    max_steps_per_block: int | None = None


class LladaRandomOptions(DecoderOptions):
    logits_eos_inf: bool = False
    confidence_eos_eot_inf: bool = False
    step_schedule: Literal["uniform", "ascending"] = "uniform"


class LladaOptions(LladaRandomOptions):
    eos_gamma: tuple[float, float] | None = None


class PcSamplerOptions(LladaOptions):
    """PC-Sampler: position decay ``pc_lambda``, clamp ``pc_alpha``, background counts file ``pc_background``
    (the authors' defaults: 0.25 and 10; see :mod:`.pc_sampler`)."""

    pc_lambda: float = 0.25
    pc_alpha: float = 10.0
    pc_background: str | None = None


class KlassOptions(DecoderOptions):
    """KLASS: commit positions whose confidence exceeds ``klass_conf_threshold`` and whose last
    ``klass_history`` KL divergences stay below ``klass_kl_threshold`` (the authors' defaults; :mod:`.klass`)."""

    klass_conf_threshold: float = 0.9
    klass_kl_threshold: float = 0.01
    klass_history: int = 2


class DpadOptions(LladaOptions):
    """DPad: suffix dropout ``dpad_dropout`` (gaussian: distance-decayed with ``dpad_sigma`` and ``dpad_scale``;
    uniform: ``dpad_keep`` columns) inside a window of ``dpad_window`` suffix columns (None: the whole
    suffix); the authors' defaults -k 4, -sc 2 (see :mod:`.dpad`)."""

    dpad_dropout: Literal["gaussian", "uniform"] = dpad.DEFAULTS["dpad_dropout"]
    dpad_window: int | None = Field(dpad.DEFAULTS["dpad_window"], ge=1)
    dpad_sigma: float = Field(dpad.DEFAULTS["dpad_sigma"], gt=0)
    dpad_scale: float = Field(dpad.DEFAULTS["dpad_scale"], gt=0)
    dpad_keep: int = Field(dpad.DEFAULTS["dpad_keep"], ge=0)


class DreamOriginOptions(Options):
    record_trajectory: bool = False
    eps: float = 1e-3


class DreamOptions(DecoderOptions):
    eps: float = 1e-3


class BlockOptions(DecoderOptions):
    eos_gamma: tuple[float, float] | None = None
    step_schedule: Literal["uniform", "ascending"] = "uniform"


class BlockDynamicOptions(BlockOptions):
    threshold_rule: Literal["quota", "top1"] = "quota"
    confidence_threshold: float = 0.9


class BlockEditingOptions(BlockOptions):
    num_to_transfer: int = 1
    editing_threshold: float = 0.9
    max_post_steps: int = 16


#: the rule each read commit field sets (fields absent from ``reads`` are dropped): mask diffusion follows
#: Fast-dLLM, the block decoders SDAR / LLaDA2 (``_block(..., rules=...)`` overrides)
PARALLEL_RULES = {"threshold": THRESHOLD_TOP1, "factor": FACTOR}


def _declare(decode, reads: frozenset[str], options: type[Options], rules: dict[str, str] | None = None):
    decode.reads = reads  # type: ignore[attr-defined]
    decode.Options = options  # type: ignore[attr-defined]
    decode.version = "1"  # type: ignore[attr-defined]
    decode.columns = None  # type: ignore[attr-defined]  (or the canvas columns of each block's forward: DPad)
    declared = PARALLEL_RULES if rules is None else rules
    decode.rules = {k: v for k, v in declared.items() if k in reads}  # type: ignore[attr-defined]
    return decode


def _mdm(policy, reads: frozenset[str], options: type[Options]):
    def decode(model, canvas, cfg, gens):
        return decode_masked_diffusion(model, canvas, cfg, gens, policy)

    decode.__doc__ = f"Masked-diffusion block loop with the {policy.__name__} policy."
    decode.supports_cfg = True  # type: ignore[attr-defined]
    decode.policy = policy  # type: ignore[attr-defined]  (the Fast-dLLM caches run the same rule)
    return _declare(decode, reads | {"cfg_scale"}, options)


def _block(rule, reads: frozenset[str], options: type[Options], rules: dict[str, str] | None = None):
    def decode(model, canvas, cfg, gens):
        return decode_blocks(model, canvas, cfg, gens, rule)

    decode.__doc__ = f"Block diffusion with the {rule.__name__} commit rule."
    decode.rule = rule  # type: ignore[attr-defined]  (conf, candidates, quota, cfg) -> commit
    return _declare(decode, reads, options, rules or {})


_PARALLEL = COMMON | {"threshold", "factor"}
llada_low_confidence = _mdm(llada.low_confidence, _PARALLEL, LladaOptions)
llada_pc_sampler = _mdm(pc_sampler.pc_sampler, COMMON, PcSamplerOptions)
llada_klass = _declare(decode_klass, COMMON, KlassOptions)  # its own logits window: no Fast-dLLM cache
llada_dpad = _declare(dpad.decode_dpad, _PARALLEL, DpadOptions)
llada_dpad.policy, llada_dpad.columns = dpad.POLICY, dpad.Dropout  # the Fast-dLLM caches run over its columns
llada_random = _mdm(llada.random_remasking, _PARALLEL, LladaRandomOptions)
dream_origin = _mdm(dream.origin, COMMON, DreamOriginOptions)
dream_maskgit_plus = _mdm(dream.maskgit_plus, _PARALLEL | {"alg_temp"}, DreamOptions)
dream_topk_margin = _mdm(dream.topk_margin, _PARALLEL | {"alg_temp"}, DreamOptions)
dream_entropy = _mdm(dream.entropy, _PARALLEL | {"alg_temp"}, DreamOptions)
block_low_confidence = _block(block.low_confidence, COMMON | {"threshold"}, BlockDynamicOptions,
                              {"threshold": THRESHOLD_QUOTA})
block_static = _block(block.static, COMMON, BlockOptions)
block_dynamic = _block(block.dynamic, COMMON | {"threshold"}, BlockDynamicOptions, {"threshold": THRESHOLD_QUOTA})
block_sequential = _block(block.sequential, COMMON, BlockOptions)
block_editing = _block(block.editing, COMMON | {"threshold"}, BlockEditingOptions, {"threshold": THRESHOLD_FLOOR})
