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

from .common import factor_rule, filter_logits, option, row_noise, sample, threshold_or_top1, top_count
from .stats import greedy_stats, plain_greedy


def _ratio(step: int, steps: int, cfg) -> float:
    eps = option(cfg, "eps", 1e-3)
    t = torch.linspace(1, eps, steps + 1, dtype=torch.float64)
    return 1.0 if step >= steps - 1 else float(1 - t[step + 1] / t[step])


def origin(logits, masked, quota, step, steps, gens, cfg, model):
    x0, _, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    reveal = row_noise(gens, tuple(masked.shape[1:]), logits.device) < _ratio(step, steps, cfg)
    return reveal & masked, x0


def _confidence_policy(kind: str):
    def policy(logits, masked, quota, step, steps, gens, cfg, model):
        x0, conf = _confidence(kind, logits, gens, cfg)
        if cfg.threshold is not None:
            return threshold_or_top1(conf, masked, cfg.threshold), x0
        if cfg.factor is not None:
            return factor_rule(conf, masked, cfg.factor), x0
        count = masked.sum(-1) if step >= steps - 1 else (masked.sum(-1) * _ratio(step, steps, cfg)).long()
        if cfg.alg_temp:
            gumbel = -torch.log(-torch.log(row_noise(gens, tuple(masked.shape[1:]), logits.device)))
            conf = conf.double() / cfg.alg_temp + gumbel
        return top_count(conf, masked, count), x0

    policy.__name__ = kind
    return policy


def _confidence(kind, logits, gens, cfg):
    """Proposals x0 (B, K) and their confidence (B, K); greedy and unfiltered: from :func:`greedy_stats`
    (one float64 pass in chunks instead of full (B, K, V) probability tensors)."""
    if kind != "maskgit_plus" and plain_greedy(cfg.temperature, cfg.top_k, cfg.top_p, logits.shape[-1]):
        stats = greedy_stats(logits, entropy=kind == "entropy", margin=kind == "topk_margin")
        return stats["x0"], stats["neg_entropy" if kind == "entropy" else "margin"]
    x0, p, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    if kind == "maskgit_plus":
        return x0, p
    probs = filter_probs(logits, cfg)
    if kind == "topk_margin":
        top2 = probs.topk(2, dim=-1).values
        return x0, top2[..., 0] - top2[..., 1]
    return x0, (probs * probs.clamp(min=1e-30).log()).sum(-1)  # negative entropy: higher = more certain


def filter_probs(logits, cfg):
    """The tempered, top-k/top-p filtered distribution (plain softmax at T = 0)."""
    scaled = logits.double() / (cfg.temperature or 1.0)
    return filter_logits(scaled, cfg.top_k, cfg.top_p).softmax(-1)


maskgit_plus = _confidence_policy("maskgit_plus")
topk_margin = _confidence_policy("topk_margin")
entropy = _confidence_policy("entropy")
