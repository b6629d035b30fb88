"""``token_ppo``: the clipped group-relative policy gradient on token log-likelihoods (d1, Coupled-GRPO, DiPO,
TraceRL, CJ-GRPO, JustGRPO).

r = exp(l - l_old) per token on the estimator's token log-likelihoods (log-ratio clamped to [-20, 20],
:func:`~dare.trainers.ops.safe_exp`), the (dual-)clipped PPO token loss max(-A r, -A clip(r, 1 - lo, 1 + hi))
(min with -A c where A < 0 when ``clip_c`` is set), plus ``beta`` times a KL (k1 / k2 / k3) to the reference,
reduced by the algorithm's ``reduce`` over its ``loss_mask`` (default: the token mean over the batch, kept exact
across micro-batches through ``LossOutput.weight``). :class:`PolicyGradientConfig` holds the settings it reads.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from ..advantages import AdvantageName
from ..api import AlgorithmConfig
from ..batch import LossOutput, RolloutBatch
from ..ops import clipped_policy_loss, kl_penalty, masked_mean
from . import policy_loss


class PolicyGradientConfig(AlgorithmConfig):
    """Settings of the clipped policy-gradient losses (``token_ppo`` and the sequence-level ones)."""

    clip_low: float = Field(0.2, ge=0, description="lower clip: ratio >= 1 - clip_low")
    clip_high: float = Field(0.2, ge=0, description="upper clip: ratio <= 1 + clip_high")
    clip_c: float | None = Field(None, gt=1, description="dual-clip constant for negative advantages (None: off, "
                                 "as in d1, DiffuCoder, DiRL and JustGRPO; DARE's verl losses use 3)")
    beta: float = Field(0.0, ge=0, description="KL coefficient against the frozen reference model")
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    advantage: AdvantageName = Field("grpo", description="advantage estimator (registry 'advantage estimator')")
    advantage_eps: float = Field(1e-6, gt=0)


@policy_loss("token_ppo")
def token_ppo(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """Token-level clipped PPO (+ beta KL) of ``algo``'s estimator, reduced by ``algo.reduce``."""
    cfg = algo.config
    k = inner_step % len(batch.noise)
    est = algo.estimator.estimate(policy, batch, batch.noise[k])
    mask = algo.loss_mask(batch)
    token_loss, stats = clipped_policy_loss(est.token_logp, batch.old_logp[k], batch.advantages,
                                            cfg.clip_low, cfg.clip_high, cfg.clip_c)
    metrics = {}
    if cfg.beta > 0:
        kl = kl_penalty(est.token_logp, batch.ref_logp[k], cfg.kl_estimator)
        token_loss = token_loss + cfg.beta * kl
        metrics["kl_ref"] = float(masked_mean(kl.detach(), mask))
    loss, weight = algo.reduce(token_loss, batch, mask)
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
