"""Registered decoders: ``decode(model, canvas, cfg, gens) -> DecodeResult``, one per family and strategy.

Registry names are ``<decoding family>:<remasking>``; a model's architecture declares its family
(``mdm`` for LLaDA, ``dream`` for Dream, ``block`` for SDAR and LLaDA2.x).
"""

from __future__ import annotations

from . import block, dream, llada
from .block import decode_blocks
from .mdm import decode_masked_diffusion


def _mdm(policy):
    def decode(model, canvas, cfg, gens):
        return decode_masked_diffusion(model, canvas, cfg, gens, policy)

    decode.__doc__ = f"Masked-diffusion block loop with the {policy.__name__} policy."
    decode.supports_cfg = True  # type: ignore[attr-defined]
    return decode


def _block(rule):
    def decode(model, canvas, cfg, gens):
        return decode_blocks(model, canvas, cfg, gens, rule)

    decode.__doc__ = f"Block diffusion with the {rule.__name__} commit rule."
    return decode


llada_low_confidence = _mdm(llada.low_confidence)
llada_random = _mdm(llada.random_remasking)
dream_origin = _mdm(dream.origin)
dream_maskgit_plus = _mdm(dream.maskgit_plus)
dream_topk_margin = _mdm(dream.topk_margin)
dream_entropy = _mdm(dream.entropy)
block_low_confidence = _block(block.low_confidence)
block_static = _block(block.static)
block_dynamic = _block(block.dynamic)
block_sequential = _block(block.sequential)
block_editing = _block(block.editing)
