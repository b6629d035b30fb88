"""Shared maths of policy-gradient losses: group advantages, clipped ratios, KL estimators, masked means.

Shapes: B sequences, T completion tokens. Advantages are one scalar per sequence, broadcast over tokens.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over ``mask`` (same shape); 0 when the mask is empty (verl's +1e-8 denominator)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / (mask.sum() + 1e-8)


def _group_stats(rewards: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row group size (B,), group mean (B,) and unbiased group std (B,) (std 1 for size-1 groups)."""
    _, inverse = torch.unique(group_ids, return_inverse=True)
    n_groups = int(inverse.max()) + 1 if inverse.numel() else 0
    r = rewards.double()
    zeros = torch.zeros(n_groups, dtype=torch.double, device=r.device)
    count = zeros.index_add(0, inverse, torch.ones_like(r))
    total = zeros.index_add(0, inverse, r)
    mean = total / count
    sq = zeros.index_add(0, inverse, (r - mean[inverse]) ** 2)
    std = torch.where(count > 1, (sq / (count - 1).clamp(min=1)).sqrt(), torch.ones_like(count))
    return count[inverse], mean[inverse], std[inverse]


def grpo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """(r - mean_g) / (std_g + eps) with the unbiased std; a group of one has mean 0 and std 1 (verl)."""
    count, mean, std = _group_stats(rewards, group_ids)
    mean = torch.where(count > 1, mean, torch.zeros_like(mean))
    return ((rewards.double() - mean) / (std + eps)).to(rewards.dtype)


def mean_baseline_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """r - mean_g (Dr.GRPO, d1 original): no division by the std."""
    _, mean, _ = _group_stats(rewards, group_ids)
    return (rewards.double() - mean).to(rewards.dtype)


def rloo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Leave-one-out baseline r_j - mean_{k != j} r_k (DiffuCoder, ESPO); 0 for a group of one."""
    count, mean, _ = _group_stats(rewards, group_ids)
    r = rewards.double()
    loo = torch.where(count > 1, (r - mean) * count / (count - 1).clamp(min=1), torch.zeros_like(r))
    return loo.to(rewards.dtype)


ADVANTAGES: dict[str, Callable[..., torch.Tensor]] = {
    "grpo": grpo_advantages,
    "mean_baseline": mean_baseline_advantages,
    "rloo": rloo_advantages,
}


def clipped_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip_low: float,
                        clip_high: float, clip_c: float | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO token loss with optional dual clip. logp/old_logp (B, T), advantages (B,) -> loss (B, T), stats.

    l = max(-A r, -A clip(r, 1-lo, 1+hi)); where A < 0 and ``clip_c`` is set, l = min(l, -A c) (dual clip).
    """
    adv = advantages[:, None].to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - clip_low, 1 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    clipped_any = (clipped > unclipped).float()
    if clip_c is not None:
        dual = torch.minimum(loss, -adv * clip_c)
        clipped_any = torch.where(adv < 0, torch.maximum(clipped_any, (dual < loss).float()), clipped_any)
        loss = torch.where(adv < 0, dual, loss)
    return loss, {"ratio": ratio.detach(), "clipped": clipped_any.detach()}


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Per-token KL(pi || ref) estimates: k1 = d, k2 = d^2 / 2, k3 = exp(-d) + d - 1 (clamped to [-10, 10])."""
    diff = logp - ref_logp
    estimators = {
        "k1": lambda d: d,
        "k2": lambda d: 0.5 * d.square(),
        "k3": lambda d: (torch.exp(-d) + d - 1).clamp(-10, 10),
    }
    return estimators[kind](diff)
