"""EB-Sampler (entropy-bounded unmasking) as a commit rule of the masked-diffusion block loop, LLaDA and Dream.

After Ben-Hamu et al., "Accelerated Sampling from Masked Diffusion Models via Entropy Bounded Unmasking"
(arXiv 2505.24857, 2025). The authors published no code; this follows the paper's selection rule. Each step the
masked positions of the active block are sorted by an error proxy (``eb_proxy``: ``entropy`` ascending, the
paper's default; ``confidence`` p(x0) or ``margin`` p(top1) - p(top2) descending), and the step commits the
largest prefix U of that order whose entropies H_l = -sum_v p_l(v) log p_l(v) satisfy the paper's bound

    sum_{l in U} H_l - max_{l in U} H_l <= gamma        (``eb_gamma``)

(the entropy sum bounds the joint dependence error of committing U at once, less the one token that has no
partner). The prefix always holds at least one position, and at least the loop's per-step quota, so a block
finishes within its ``steps`` share (with steps = gen_length: one token, the paper's "at least one"); a block
ends when full, so NFE falls below ``steps`` when positions are certain. Proposals and entropies come from the
plain softmax at T = 0 (float64, :func:`.stats.greedy_stats`); at T > 0 tokens are Gumbel-max samples and
entropies those of the tempered, top-k / top-p filtered distribution.

Public reference: Kamichanw/d2Cache (commit 72feb60, Apache-2.0), src/generation/vanilla.py
``confidence_unmasking`` with ``gamma``, sorts by the decoder's confidence (``alg``) and bounds the float32
entropies' cumulative sum less their running maximum; its maximum runs over the batch dimension
(``cummax(dim=0)``), so for one row it subtracts the current entropy, not the prefix maximum. Sorted by entropy
(``alg="entropy"``) the two coincide, and tests/backends/test_strategy_eb_sampler.py holds this rule to its
tokens; sorted by confidence or margin this module keeps the paper's maximum.

The rule reads no ``threshold`` or ``factor`` and runs under every KV cache (``cacheable``).
Shapes: B rows, K block length, V vocabulary.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from .common import COMMON, DecoderOptions, sample, top_count
from .dream import filter_probs
from .mdm import NFE, decode_masked_diffusion
from .spec import decoder
from .stats import greedy_stats, plain_greedy


class EbSamplerOptions(DecoderOptions):
    """EB-Sampler: the entropy bound ``eb_gamma`` and the order ``eb_proxy`` positions are taken in."""

    eb_gamma: float = Field(0.01, ge=0)
    eb_proxy: Literal["entropy", "confidence", "margin"] = "entropy"


def statistics(logits: torch.Tensor, gens, cfg) -> dict[str, torch.Tensor]:
    """logits (B, K, V) -> ``x0`` (B, K) proposals and the float64 (B, K) ``entropy``, ``confidence`` (p(x0))
    and ``margin`` of the distribution the proposals come from."""
    if plain_greedy(cfg.temperature, cfg.top_k, cfg.top_p, logits.shape[-1]):
        stats = greedy_stats(logits, entropy=True, margin=True)
        return {"x0": stats["x0"], "entropy": -stats["neg_entropy"], "confidence": stats["p"],
                "margin": stats["margin"]}
    x0, p, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    probs = filter_probs(logits, cfg)
    top2 = probs.topk(2, dim=-1).values
    return {"x0": x0, "entropy": -(probs * probs.clamp(min=1e-300).log()).sum(-1), "confidence": p,
            "margin": top2[..., 0] - top2[..., 1]}


def bounded_count(entropy: torch.Tensor, order: torch.Tensor, candidates: torch.Tensor, gamma: float) -> torch.Tensor:
    """The size (B,) of the largest prefix of ``order`` (B, K: positions, most certain first) over the
    candidates (B, K) whose entropies (B, K) have sum - max <= gamma; at least 1 where a row has candidates."""
    ranked = entropy.gather(-1, order)
    inside = candidates.gather(-1, order)
    ranked = ranked.masked_fill(~inside, 0.0)  # candidates come first in the order; the rest never count
    slack = ranked.cumsum(-1) - ranked.cummax(-1).values  # non-decreasing along the prefix
    count = ((slack <= gamma) & inside).sum(-1)
    return torch.minimum(count.clamp(min=1), candidates.sum(-1))


def _rule(logits, masked, quota, step, steps, gens, cfg, opts: EbSamplerOptions, model):
    """logits (B, K, V) of the active block -> (commit (B, K), x0 (B, K))."""
    stats = statistics(logits, gens, cfg)
    score = -stats["entropy"] if opts.eb_proxy == "entropy" else stats[opts.eb_proxy]
    score = score.masked_fill(~masked, float("-inf"))
    order = score.argsort(dim=-1, descending=True, stable=True)
    count = bounded_count(stats["entropy"], order, masked, opts.eb_gamma)
    if quota is not None:
        count = torch.maximum(count, quota)
    return top_count(score, masked, count), stats["x0"]


EB_NFE = NFE + "; a block ends when full, so certain positions make NFE fall below steps"
eb_llada = decoder("mdm:eb_sampler", loop=decode_masked_diffusion, reads=COMMON | {"cfg_scale"},
                   options=EbSamplerOptions, nfe=EB_NFE, supports_cfg=True, cacheable=True)(_rule)
eb_dream = decoder("dream:eb_sampler", loop=decode_masked_diffusion, reads=COMMON | {"cfg_scale"},
                   options=EbSamplerOptions, nfe=EB_NFE, supports_cfg=True, cacheable=True)(_rule)
