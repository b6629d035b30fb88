"""The Information-Gain sampler (arXiv 2602.18176) on LLaDA and Dream, uncached.

Reference implementation yks23/dllm (commit 4cf34a50531fd1755417e1476bcf47ae56833b20):
``dllm/pipelines/info_gain/core.py`` (``compute_entropy``, ``generate_candidates``, ``score_candidates``),
``llada/sampler.py`` and ``dream/sampler.py`` (``_info_gain_select``, ``sample`` with ``use_cache=None``,
``_bypass``). The authors' README: Info-Gain is active only without a KV cache, so no cache is offered here.

Each step commits k positions (k from the reference's linear schedule, :func:`.info_gain_core.transfer_schedule`,
over ceil(steps / blocks) steps per block). Dream's uncached reference sampler has no blocks: block_length =
gen_length reproduces it; shorter blocks run the LLaDA sampler's block loop with Dream's proposals.

1. Bypass: when ``info_gain_threshold`` is set and some masked position of the block has top-1 probability
   >= it, commit up to k of those (most probable first), no look-ahead.
2. Candidates: N = ``info_gain_candidates`` actions. Candidate 0 is the k most confident positions; candidate
   c >= 1 is the top k of conf / ``info_gain_position_temperature`` + Gumbel over the block's masked positions
   (conf the raw probability). Duplicate position sets are dropped; with <= k masked positions, one action
   left, N <= 1 or a position temperature <= 0 the step commits directly.
3. Look-ahead: one forward over the N next canvases (one model call of N sequences). H_next is the mean
   entropy over every still-masked position of a next canvas, C the summed current entropy at the action's
   positions (float32 softmax clamped at 1e-12); the action maximising J = -C - H_next (``info_gain``) or
   J = -H_next (``lookum``) is committed, and its look-ahead logits serve the next step (no forward).
4. When k covers the block's remaining masks, all are filled at once (no look-ahead).

EOS and PAD logits are lowered by 4.0 (twice when they are the same token, as the reference's two
subtractions do); after every commit, the masks after a row's first EOS become EOS.

Tokens: LLaDA proposes the (Gumbel-)argmax at ``temperature`` (the reference's float64 ``exp(l) / (-log u)^T``,
its noise drawn over the whole canvas as the reference does, so a seeded row replays its stream); Dream proposes
the argmax of its tempered, top-p then top-k filtered distribution (no sampling) and, at temperature > 0,
perturbs candidate c >= 1's confidences by 0.1 x Gumbel. Random numbers come from each row's generator in the
reference's order; rows are decoded one at a time (the reference runs one), so a row's output equals its
batch-1 output, and on a CPU its seeded draws equal the reference's under ``torch.manual_seed``.

``info_gain_official_quirk`` (default True, the reference's behaviour): Dream's look-ahead logits are not lowered
at EOS/PAD, and the winner's look-ahead logits feed the next step unlowered (LLaDA lowers them). False lowers
them on Dream too. As in the reference, a bypass that commits fewer than k tokens leaves its block with masks
the schedule may not fill (only when k > 1); those masks stay in the output.

Defaults: N 8, position temperature 0.2 and bypass threshold 0.8, from the authors' run configs
(yks23/Information-Gain-Sampler@0ae2da8 configs/base.yaml, gsm8k_info_gain.yaml; the sampler dataclasses say
0.1 and no bypass). The decoder has its own forward, so the Fast-dLLM engine refuses it under a cache.

NFE: one per model call (a look-ahead is one call over N sequences); the reference has no counter.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from .common import COMMON, DecodeResult, LoopOptions
from .info_gain_core import DreamProposals, LladaProposals, Row, decode_row
from .spec import decoder


class InfoGainOptions(LoopOptions):
    """The look-ahead's candidates, their position temperature and the high-confidence bypass (the authors'
    configs/base.yaml), the objective, and the reference's Dream look-ahead quirk (see the module)."""

    info_gain_candidates: int = Field(8, ge=1)
    info_gain_position_temperature: float = Field(0.2, ge=0)
    info_gain_threshold: float | None = Field(0.8, gt=0, le=1)
    info_gain_variant: Literal["info_gain", "lookum"] = "info_gain"
    info_gain_official_quirk: bool = True


NFE = ("one per model call: a forward of the canvas, or a look-ahead (one call over the N candidate canvases); "
       "a look-ahead's logits serve the next step, which runs no forward")


def _decode(model, canvas, cfg, opts: InfoGainOptions, gens, proposals, block: int, steps: int) -> DecodeResult:
    """Each row on its own unpadded canvas (its prompt, then G masks), as the reference runs one row."""
    gen = cfg.gen_length
    tokens, steps_taken, nfe = [], [], []
    for r, generator in enumerate(gens):
        start = int(canvas.prompt_len[r])
        row = Row(canvas.tokens[r, canvas.gen_start - start:canvas.gen_start + gen].clone(), start, generator)
        steps_taken.append(decode_row(model, row, block, steps, opts, proposals))
        tokens.append(row.gen)
        nfe.append(row.nfe)
    block_ids = (torch.arange(gen, device=canvas.tokens.device) // block).expand(len(gens), -1)
    return DecodeResult(torch.stack(tokens), torch.stack(steps_taken), block_ids.clone(),
                        torch.tensor(nfe, device=canvas.tokens.device))


def _steps_per_block(cfg) -> int:
    return math.ceil(cfg.steps / (cfg.gen_length // cfg.block_length))  # the reference's ceil(steps / blocks)


@decoder("mdm:info_gain", reads=COMMON - {"top_p", "top_k"}, options=InfoGainOptions, nfe=NFE)
def decode_info_gain_llada(model, canvas, cfg, opts: InfoGainOptions, gens, rule=None) -> DecodeResult:
    """LLaDA: semi-autoregressive blocks, ceil(steps / blocks) steps each (the reference's LLaDA sampler)."""
    return _decode(model, canvas, cfg, opts, gens, LladaProposals(cfg.temperature), cfg.block_length,
                   _steps_per_block(cfg))


@decoder("dream:info_gain", reads=COMMON, options=InfoGainOptions, nfe=NFE)
def decode_info_gain_dream(model, canvas, cfg, opts: InfoGainOptions, gens, rule=None) -> DecodeResult:
    """Dream: the reference's uncached Dream sampler is one block (block_length = gen_length); shorter blocks
    run the LLaDA sampler's block loop with Dream's proposals."""
    proposals = DreamProposals(cfg.temperature, cfg.top_p, cfg.top_k, opts.info_gain_official_quirk)
    return _decode(model, canvas, cfg, opts, gens, proposals, cfg.block_length, _steps_per_block(cfg))
