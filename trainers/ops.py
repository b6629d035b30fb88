"""Shared maths of policy-gradient losses: clipped ratios, KL estimators, masked means (the group advantages
live in :mod:`.advantages`, a registry; they are re-exported here for plugins written against ``ops``).

Shapes: B sequences, T completion tokens. Advantages are one scalar per sequence, broadcast over tokens.
"""

from __future__ import annotations

import torch

from .advantages import (  # noqa: F401
    grpo_advantages,
    mean_baseline_advantages,
    population_advantages,
    rloo_advantages,
)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over ``mask`` (same shape); 0 when the mask is empty (verl's +1e-8 denominator)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / (mask.sum() + 1e-8)


LOG_RATIO_BOUND = 20.0
"""Log-ratios are clamped to [-20, 20] before ``exp`` (verl's bound): exp stays finite in float32, so
0 * ratio and its gradient are never 0 * inf = NaN (a group of equal rewards has A = 0)."""


def safe_exp(log_ratio: torch.Tensor) -> torch.Tensor:
    """exp(clamp(log_ratio, -20, 20)): a ratio that cannot overflow (same shape)."""
    return torch.exp(log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND))


def clip_surrogate(ratio: torch.Tensor, adv: torch.Tensor, clip_low: float, clip_high: float,
                   clip_c: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The PPO loss of any ratio, token (B, T) or sequence (B,) level; ``adv`` broadcasts against it.

    l = max(-A r, -A clip(r, 1 - lo, 1 + hi)); with ``clip_c`` set, where A < 0: l = min(l, -A c) (dual
    clip). Returns the loss and whether a clip bound was taken (bool), both shaped like ``ratio``.
    """
    adv = adv.to(ratio.dtype)
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1 - clip_low, 1 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    took = clipped > unclipped
    if clip_c is not None:
        capped = torch.minimum(loss, -adv * clip_c)
        took = torch.where(adv < 0, took | (capped < loss), took)
        loss = torch.where(adv < 0, capped, loss)
    return loss, took


def clipped_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip_low: float,
                        clip_high: float, clip_c: float | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Token-level PPO: logp/old_logp (B, T), advantages (B,) -> loss (B, T) and stats (ratio, clipped).

    r = exp(clamp(logp - old, -20, 20)), then :func:`clip_surrogate`.
    """
    ratio = safe_exp(logp - old_logp)
    loss, took = clip_surrogate(ratio, advantages[:, None], clip_low, clip_high, clip_c)
    return loss, {"ratio": ratio.detach(), "clipped": took.float().detach()}


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Per-token KL(pi || ref) estimates of d = logp - ref: k1 = d, k2 = d^2 / 2, k3 = exp(-d) + d - 1.

    k3 takes exp of -d clamped to [-20, 20] (verl / DiRL clamp before exp; unclamped, d < -88.7 overflows
    float32 and the backward gives 0 * inf = NaN) and the value is then clamped to [-10, 10] (verl).
    """
    diff = logp - ref_logp
    estimators = {
        "k1": lambda d: d,
        "k2": lambda d: 0.5 * d.square(),
        "k3": lambda d: (safe_exp(-d) + d - 1).clamp(-10, 10),
    }
    return estimators[kind](diff)
