"""Dream's decoding algorithms (origin, maskgit_plus, topk_margin, entropy) as block-loop policies.

Per block with S steps and timesteps t_i = linspace(1, eps, S + 1): ``origin`` reveals each masked
position independently with probability 1 - t_{i+1}/t_i (all at the last step); the confidence
algorithms commit k = floor(M * (1 - t_{i+1}/t_i)) positions (all remaining at the last step), the most
confident ones, or with ``alg_temp`` > 0 a sample without replacement from softmax(confidence / alg_temp).
Proposals come from the tempered top-k/top-p filtered distribution. Unlike upstream, M is each row's own
masked count (upstream averages over the batch, which makes outputs depend on batch composition).
With ``threshold`` or ``factor`` the confidence algorithms use the Fast-dLLM parallel rules instead.
"""

from __future__ import annotations

import torch

from .common import (
    COMMON,
    DecoderOptions,
    LoopOptions,
    factor_rule,
    filter_logits,
    row_noise,
    sample,
    threshold_or_top1,
    top_count,
)
from .llada import PARALLEL_RULES
from .mdm import NFE, PARALLEL, decode_masked_diffusion
from .spec import decoder
from .stats import greedy_stats, plain_greedy


class DreamOriginOptions(LoopOptions):
    """``eps``: the last timestep of linspace(1, eps, S + 1) (Dream's default 1e-3)."""

    eps: float = 1e-3


class DreamOptions(DecoderOptions):
    """``eps`` as for origin."""

    eps: float = 1e-3


def _ratio(step: int, steps: int, eps: float) -> float:
    t = torch.linspace(1, eps, steps + 1, dtype=torch.float64)
    return 1.0 if step >= steps - 1 else float(1 - t[step + 1] / t[step])


@decoder("dream:origin", loop=decode_masked_diffusion, reads=COMMON | {"cfg_scale"}, options=DreamOriginOptions,
         nfe=NFE, supports_cfg=True, cacheable=True)
def origin(logits, masked, quota, step, steps, gens, cfg, opts: DreamOriginOptions, model):
    """Each masked position revealed with probability 1 - t_{i+1} / t_i."""
    x0, _, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    reveal = row_noise(gens, tuple(masked.shape[1:]), logits.device) < _ratio(step, steps, opts.eps)
    return reveal & masked, x0


def _confidence_policy(kind: str, aliases: tuple[str, ...] = ()):
    def policy(logits, masked, quota, step, steps, gens, cfg, opts: DreamOptions, model):
        x0, conf = CONFIDENCES[kind](logits, gens, cfg)
        if cfg.threshold is not None:
            return threshold_or_top1(conf, masked, cfg.threshold), x0
        if cfg.factor is not None:
            return factor_rule(conf, masked, cfg.factor), x0
        count = masked.sum(-1) if step >= steps - 1 else (masked.sum(-1) * _ratio(step, steps, opts.eps)).long()
        if cfg.alg_temp:
            gumbel = -torch.log(-torch.log(row_noise(gens, tuple(masked.shape[1:]), logits.device)))
            conf = conf.double() / cfg.alg_temp + gumbel
        return top_count(conf, masked, count), x0

    policy.__name__ = policy.__qualname__ = kind
    policy.__doc__ = f"Dream's {kind}: the per-step share of the most confident, or Fast-dLLM's rules."
    return decoder(f"dream:{kind}", loop=decode_masked_diffusion, reads=PARALLEL | {"alg_temp", "cfg_scale"},
                   options=DreamOptions, rules=PARALLEL_RULES, nfe=NFE, aliases=aliases, supports_cfg=True,
                   cacheable=True)(policy)


# Proposals x0 (B, K) and their confidence (B, K). Greedy and unfiltered, margin and entropy come from
# :func:`greedy_stats` (one float64 pass in chunks instead of full (B, K, V) probability tensors).
def _maskgit_plus(logits, gens, cfg):
    x0, p, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    return x0, p


def _topk_margin(logits, gens, cfg):
    if plain_greedy(cfg.temperature, cfg.top_k, cfg.top_p, logits.shape[-1]):
        stats = greedy_stats(logits, margin=True)
        return stats["x0"], stats["margin"]
    x0, _, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    top2 = filter_probs(logits, cfg).topk(2, dim=-1).values
    return x0, top2[..., 0] - top2[..., 1]


def _entropy(logits, gens, cfg):
    if plain_greedy(cfg.temperature, cfg.top_k, cfg.top_p, logits.shape[-1]):
        stats = greedy_stats(logits, entropy=True)
        return stats["x0"], stats["neg_entropy"]
    x0, _, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    probs = filter_probs(logits, cfg)
    return x0, (probs * probs.clamp(min=1e-30).log()).sum(-1)  # negative entropy: higher = more certain


CONFIDENCES = {"maskgit_plus": _maskgit_plus, "topk_margin": _topk_margin, "entropy": _entropy}


def filter_probs(logits, cfg):
    """The tempered, top-k/top-p filtered distribution (plain softmax at T = 0)."""
    scaled = logits.double() / (cfg.temperature or 1.0)
    return filter_logits(scaled, cfg.top_k, cfg.top_p).softmax(-1)


maskgit_plus = _confidence_policy("maskgit_plus", aliases=("dream:low_confidence",))
topk_margin = _confidence_policy("topk_margin", aliases=("dream:margin",))
entropy = _confidence_policy("entropy")
