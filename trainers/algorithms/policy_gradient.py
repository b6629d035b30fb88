"""The clipped group-relative policy gradient shared by d1, Coupled-GRPO and DiPO.

Each algorithm is this loss plus its own estimator and defaults: advantages from the group's rewards,
r = exp(l - l_old) per token on the estimator's token log-likelihoods, the (dual-)clipped PPO token loss,
an optional KL to the reference model, and a token mean over the whole batch (the trainer keeps it exact
across micro-batches through ``LossOutput.weight``). Ratios are exp of log-ratios clamped to [-20, 20]
(:func:`~dare.trainers.ops.safe_exp`). The dual clip is off unless a config sets ``clip_c``.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from ..api import Algorithm, AlgorithmConfig
from ..batch import LossOutput, RolloutBatch
from ..ops import ADVANTAGES, clipped_policy_loss, kl_penalty, masked_mean


AdvantageKind = Literal["grpo", "mean_baseline", "rloo", "population"]


class PolicyGradientConfig(AlgorithmConfig):
    clip_low: float = Field(0.2, ge=0, description="lower clip: ratio >= 1 - clip_low")
    clip_high: float = Field(0.2, ge=0, description="upper clip: ratio <= 1 + clip_high")
    clip_c: float | None = Field(None, gt=1, description="dual-clip constant for negative advantages (None: off, "
                                 "as in d1, DiffuCoder, DiRL and JustGRPO; DARE's verl losses use 3)")
    beta: float = Field(0.0, ge=0, description="KL coefficient against the frozen reference model")
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    advantage: AdvantageKind = "grpo"
    advantage_eps: float = Field(1e-6, gt=0)


class PolicyGradient(Algorithm):
    """Base class: subclasses choose ``Config`` defaults, ``needs`` and ``default_estimator``."""

    Config = PolicyGradientConfig

    def advantages(self, batch: RolloutBatch) -> torch.Tensor:
        cfg = self.config
        return ADVANTAGES[cfg.advantage](batch.rewards, batch.group_ids, cfg.advantage_eps)

    def loss_mask(self, batch: RolloutBatch) -> torch.Tensor:
        """Tokens (B, T) bool that enter the loss; CJ-GRPO keeps only tokens with a recorded transition."""
        return batch.completion_mask

    def reduce(self, token_loss: torch.Tensor, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(loss, weight of this micro-batch): the token mean here; the trainer keeps it exact across
        micro-batches by weighting each with ``weight``."""
        return masked_mean(token_loss, mask), float(mask.sum())

    def loss(self, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        cfg = self.config
        k = inner_step % len(batch.noise)
        est = self.estimator.estimate(policy, batch, batch.noise[k])
        mask = self.loss_mask(batch)
        token_loss, stats = clipped_policy_loss(est.token_logp, batch.old_logp[k], batch.advantages,
                                                cfg.clip_low, cfg.clip_high, cfg.clip_c)
        metrics = {}
        if cfg.beta > 0:
            kl = kl_penalty(est.token_logp, batch.ref_logp[k], cfg.kl_estimator)
            token_loss = token_loss + cfg.beta * kl
            metrics["kl_ref"] = float(masked_mean(kl.detach(), mask))
        loss, weight = self.reduce(token_loss, batch, mask)
        ratio = stats["ratio"]
        log_ratio = (batch.old_logp[k] - est.token_logp).detach()
        metrics.update(
            clip_fraction=float(masked_mean(stats["clipped"], mask)),
            ratio_mean=float(masked_mean(ratio, mask)),
            ratio_max_dev=float(((ratio - 1).abs() * mask).max()) if mask.any() else 0.0,
            ppo_kl=float(masked_mean(torch.exp(log_ratio) - log_ratio - 1, mask)),
            entropy=float(masked_mean(est.entropy, mask)) if est.entropy is not None else 0.0,
            policy_loss=float(loss.detach()),
        )
        return LossOutput(loss=loss, weight=weight, metrics=metrics)
