"""``sandwich``: SPG's REINFORCE on likelihood bounds chosen by the sign of the advantage (Wang et al. 2025,
facebookresearch/SPG).

Rows with A > 0 raise the lower bound (ELBO); rows with A <= 0 lower ``negative_bound`` (``mix``:
mix_weight * EUBO + (1 - mix_weight) * ELBO, or ``eubo``, ``elbo``, ``zero``). No ratio, no clip, no KL:
loss = -sum_b A_b bound_b / sum_b L_v,b (the token mean of -A x the per-token bound contributions).
"""

from __future__ import annotations

import torch

from ..batch import LossOutput, RolloutBatch
from ..ops import masked_mean
from . import policy_loss

NEGATIVE_BOUNDS = {
    "mix": lambda lower, upper, w: w * upper + (1 - w) * lower,
    "eubo": lambda lower, upper, w: upper,
    "elbo": lambda lower, upper, w: lower,
    "zero": lambda lower, upper, w: torch.zeros_like(lower),
}


def bound_surrogate(algo, policy, batch: RolloutBatch, inner_step: int) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token contributions (B, T) of each row's chosen bound, and bound statistics."""
    cfg = algo.config
    noise = batch.noise[inner_step % len(batch.noise)]
    lower, upper, entropy = algo.estimator.bounds(policy, batch, noise, cfg.eubo_beta)
    negative = NEGATIVE_BOUNDS[cfg.negative_bound](lower, upper, cfg.mix_weight)
    token = torch.where((batch.advantages > 0)[:, None], lower, negative)
    mask = batch.completion_mask
    stats = {"elbo_per_token": float(masked_mean(lower.detach(), mask)),
             "eubo_per_token": float(masked_mean(upper.detach(), mask)),
             "negative_share": float((batch.advantages <= 0).float().mean()),
             "entropy": float(masked_mean(entropy, mask))}
    return token, stats


@policy_loss("sandwich")
def sandwich(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """-A x the chosen bound, token mean over the batch."""
    token, metrics = bound_surrogate(algo, policy, batch, inner_step)
    mask = batch.completion_mask
    adv = batch.advantages[:, None].to(token.dtype)
    loss = masked_mean(-adv * token, mask)
    metrics["policy_loss"] = float(loss.detach())
    return LossOutput(loss=loss, weight=float(mask.sum()), metrics=metrics)
