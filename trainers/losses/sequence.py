"""Sequence-level policy gradients on ELBO estimates: ``sequence_log_clip`` (EBPO) and ``sequence_ppo`` (ESPO).

Per row: E = sum of the estimator's token log-likelihoods over the counted tokens, log rho = (E - E_old) / L
(L = 1 for EBPO; for ESPO ``normalise_length`` or the batch's padded response length), a clipped surrogate,
an optional KL on the raw ELBOs (also / L), and the mean over the rows that have counted tokens (exact across
micro-batches through ``LossOutput.weight``).

- ``sequence_log_clip`` (EBPO, LLaDA2.1 report): the clip in log space, A >= 0: log rho <- min(log rho,
  log(1 + eps_high)); A < 0: log rho <- max(log rho, log(1 - eps_low)); loss -A exp(log rho) (no dual clip).
- ``sequence_ppo`` (ESPO, ML-GSAI/ESPO ``compute_loss``): plain clipped PPO max(-A rho, -A clip(rho, 1 +- eps)).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..batch import LossOutput, RolloutBatch
from ..ops import clip_surrogate, kl_penalty, safe_exp
from . import policy_loss

Surrogate = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def log_clipped_ratio(log_ratio: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float) -> torch.Tensor:
    """EBPO's clip in log space on sequence log-ratios (B,): the clipped log rho (B,)."""
    upper = torch.minimum(log_ratio, torch.full_like(log_ratio, math.log1p(eps_high)))
    lower = torch.maximum(log_ratio, torch.full_like(log_ratio, math.log1p(-eps_low)))
    return torch.where(adv >= 0, upper, lower)


def sequence_ratio_loss(algo, policy, batch: RolloutBatch, inner_step: int, surrogate: Surrogate,
                        length: Callable[[torch.Tensor], float]) -> LossOutput:
    """The shared body: ``surrogate(log rho (B,), A (B,)) -> (loss (B,), clipped (B,) bool)``, ``length(mask)``."""
    cfg = algo.config
    k = inner_step % len(batch.noise)
    mask = batch.completion_mask
    length = length(mask)
    est = algo.estimator.estimate(policy, batch, batch.noise[k])
    elbo = (est.token_logp * mask).sum(1)  # E (B,)
    old = (batch.old_logp[k].to(elbo.dtype) * mask).sum(1)
    log_ratio = (elbo - old) / length
    per_row, clipped = surrogate(log_ratio, batch.advantages.to(elbo.dtype))
    metrics = {}
    if cfg.beta > 0:
        kl = kl_penalty(elbo, (batch.ref_logp[k].to(elbo.dtype) * mask).sum(1), cfg.kl_estimator) / length
        per_row = per_row + cfg.beta * kl
        metrics["kl_ref"] = float(kl.detach().mean())
    rows = mask.any(1)
    count = int(rows.sum())
    loss = (per_row * rows).sum() / max(count, 1)
    ratio = torch.exp(log_ratio.detach())[rows]
    metrics.update(
        policy_loss=float(loss.detach()),
        clip_fraction=float(clipped[rows].float().mean()) if count else 0.0,
        ratio_mean=float(ratio.mean()) if count else 1.0,
        ratio_max_dev=float((ratio - 1).abs().max()) if count else 0.0,
        elbo=float(elbo.detach()[rows].mean()) if count else 0.0,
        entropy=float((est.entropy * mask).sum() / mask.sum().clamp(min=1)),
    )
    return LossOutput(loss=loss, weight=float(count), metrics=metrics)


@policy_loss("sequence_log_clip")
def sequence_log_clip(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """EBPO: rho = exp(E - E_old), clipped in log space."""
    cfg = algo.config

    def surrogate(log_ratio: torch.Tensor, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        clipped = log_clipped_ratio(log_ratio, adv, cfg.clip_low, cfg.clip_high)
        return -adv * safe_exp(clipped), clipped.detach() != log_ratio.detach()

    return sequence_ratio_loss(algo, policy, batch, inner_step, surrogate, lambda mask: 1.0)


@policy_loss("sequence_ppo")
def sequence_ppo(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """ESPO: rho = exp((E - E_old) / L), plain clipped PPO."""
    cfg = algo.config

    def surrogate(log_ratio: torch.Tensor, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return clip_surrogate(safe_exp(log_ratio), adv, cfg.clip_low, cfg.clip_high, None)

    return sequence_ratio_loss(algo, policy, batch, inner_step, surrogate,
                               lambda mask: float(getattr(cfg, "normalise_length", None) or mask.shape[1]))
