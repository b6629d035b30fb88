"""ESPO, ELBO-based Sequence-level Policy Optimization (ML-GSAI/ESPO; yjyddq/DARE llada_dp_actor_espo.py).
Masked diffusion only.

The likelihood is the ``espo_elbo`` sequence ELBO (2 stratified draws, each averaged with its complementary
corruption) normalised per token: s = ELBO / L. One sequence ratio rho = exp(s - s_old) with plain clipped
PPO (no dual clip), loss = mean over sequences of max(-A rho, -A clip(rho, 1 +- eps)); KL k2 on the raw
ELBOs divided by L: beta (ELBO - ELBO_ref)^2 / (2 L). RLOO advantages; 8 inner updates per rollout batch,
each on its own precomputed draws (so the ratio leaves 1 from the second). Recipe values per task: math
beta 1e-3, code 1e-2, Countdown 3e-3 with eps 0, Sudoku 1e-2 (defaults here: math's).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from ..api import Needs, algorithm
from ..batch import LossOutput, RolloutBatch
from ..ops import kl_penalty
from .bgpo import dual_clip
from .policy_gradient import AdvantageKind, PolicyGradient, PolicyGradientConfig


class ESPOConfig(PolicyGradientConfig):
    estimator: str = "espo_elbo"
    estimator_args: dict = Field(default_factory=lambda: {"samples": 2, "reduce_var": True})
    advantage: AdvantageKind = "rloo"
    clip_c: float | None = Field(None, gt=1, description="ESPO has no dual clip")
    beta: float = 1e-3
    kl_estimator: Literal["k1", "k2", "k3"] = "k2"
    inner_steps: int = 8
    resample_noise: bool = True
    normalise_length: int | None = Field(None, ge=1, description="L of s = ELBO / L; None: the batch's padded "
                                         "response length (DARE max_response_length)")


@algorithm("espo")
class ESPO(PolicyGradient):
    """Clipped PPO on the sequence ratio of per-token-normalised ELBOs, k2 KL on the raw ELBOs."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = ESPOConfig
    default_estimator = {"bidirectional": "espo_elbo"}

    def loss(self, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        cfg = self.config
        k = inner_step % len(batch.noise)
        mask = batch.completion_mask
        length = float(cfg.normalise_length or mask.shape[1])
        est = self.estimator.estimate(policy, batch, batch.noise[k])
        elbo = (est.token_logp * mask).sum(1)  # (B,)
        old = (batch.old_logp[k].to(elbo.dtype) * mask).sum(1)
        adv = batch.advantages.to(elbo.dtype)
        log_ratio = (elbo - old) / length
        per_row, clipped = dual_clip(torch.exp(log_ratio), adv, cfg.clip_low, cfg.clip_high, None)
        metrics = {}
        if cfg.beta > 0:
            ref = (batch.ref_logp[k].to(elbo.dtype) * mask).sum(1)
            kl = kl_penalty(elbo, ref, cfg.kl_estimator) / length
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
            entropy=float((est.entropy * mask).sum() / mask.sum().clamp(min=1)),
        )
        return LossOutput(loss=loss, weight=float(count), metrics=metrics)
