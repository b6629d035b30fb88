"""EBPO, ELBO-based Block Policy Optimization (LLaDA2.1 report; yjyddq/DARE ebpo actors). Block diffusion only.

The likelihood is the all-block stratified composite ELBO E (``block_composite_elbo``, N = 16 draws, every
response block masked in every draw). One *sequence-level* ratio rho = exp(E - E_old), clipped in log space:
A >= 0: log rho <- min(log rho, log(1 + eps_high)); A < 0: log rho <- max(log rho, log(1 - eps_low)); loss =
mean over sequences of -A exp(log rho) (the PPO max(-A rho, -A clip(rho)) without overflow, no dual clip).
Optional KL (off by default) k1 / k2 / k3 on E - E_ref. DARE runs it as the report describes (SDAR: block 4,
mc 16, clip 0.2, GRPO std advantages); there is no DARE preset.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from ..api import Needs, algorithm
from ..batch import LossOutput, RolloutBatch
from ..ops import kl_penalty
from .policy_gradient import PolicyGradient, PolicyGradientConfig


def log_clipped_ratio(log_ratio: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float) -> torch.Tensor:
    """EBPO's clip in log space on sequence log-ratios (B,): the clipped log rho (B,)."""
    upper = torch.minimum(log_ratio, torch.full_like(log_ratio, math.log1p(eps_high)))
    lower = torch.maximum(log_ratio, torch.full_like(log_ratio, math.log1p(-eps_low)))
    return torch.where(adv >= 0, upper, lower)


class EBPOConfig(PolicyGradientConfig):
    estimator: str = "block_composite_elbo"
    estimator_args: dict = Field(default_factory=lambda: {"samples": 16})
    clip_c: float | None = Field(None, gt=1, description="EBPO has no dual clip")


@algorithm("ebpo")
class EBPO(PolicyGradient):
    """Sequence-ratio PPO on the composite block ELBO, clipped in log space."""

    needs = Needs(rollout=True, attention="block_causal")
    Config = EBPOConfig
    default_estimator = {"block_causal": "block_composite_elbo"}

    def loss(self, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        cfg = self.config
        k = inner_step % len(batch.noise)
        mask = batch.completion_mask
        est = self.estimator.estimate(policy, batch, batch.noise[k])
        elbo = (est.token_logp * mask).sum(1)  # E (B,)
        old = (batch.old_logp[k].to(elbo.dtype) * mask).sum(1)
        adv = batch.advantages.to(elbo.dtype)
        log_ratio = elbo - old
        clipped = log_clipped_ratio(log_ratio, adv, cfg.clip_low, cfg.clip_high)
        per_row = -adv * torch.exp(clipped)
        metrics = {}
        if cfg.beta > 0:
            kl = kl_penalty(elbo, (batch.ref_logp[k].to(elbo.dtype) * mask).sum(1), cfg.kl_estimator)
            per_row = per_row + cfg.beta * kl
            metrics["kl_ref"] = float(kl.detach().mean())
        rows = mask.any(1)
        count = int(rows.sum())
        loss = (per_row * rows).sum() / max(count, 1)
        ratio = torch.exp(log_ratio.detach())[rows]
        metrics.update(
            policy_loss=float(loss.detach()),
            clip_fraction=float((clipped.detach() != log_ratio.detach())[rows].float().mean()) if count else 0.0,
            ratio_mean=float(ratio.mean()) if count else 1.0,
            ratio_max_dev=float((ratio - 1).abs().max()) if count else 0.0,
            elbo=float(elbo.detach()[rows].mean()) if count else 0.0,
            entropy=float((est.entropy * mask).sum() / mask.sum().clamp(min=1)),
        )
        return LossOutput(loss=loss, weight=float(count), metrics=metrics)
