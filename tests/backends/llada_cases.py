"""Our ``mdm:low_confidence`` on one prompt with a fixture case's settings, as the authors' LLaDA-style loops run it
(tests/backends/fixtures/scripts/llada_loop_cases.py records theirs): (generated tokens, forward count)."""

from __future__ import annotations

import torch

from dare.backends.decoding import llada
from dare.backends.decoding.common import Canvas
from dare.backends.decoding.mdm import decode_masked_diffusion
from dare.harness.records import DecodingConfig


def low_confidence(model, ids: list[int], case: dict) -> tuple[list[int], int]:
    cfg = DecodingConfig(gen_length=case["gen_length"], steps=case["steps"], block_length=case["block_length"])
    canvas = Canvas.build([ids], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        result = decode_masked_diffusion(model, canvas, cfg, llada.LladaOptions(), [torch.Generator()],
                                         llada.low_confidence)
    return result.tokens[0].tolist(), int(result.nfe[0])
