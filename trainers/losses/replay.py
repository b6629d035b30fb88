"""``replay_pg``: RLDF's policy gradient on replayed denoising states (ant-research/Drift@7abd99b
``trainer/main_rl.py`` ``DriftTrainer._compute_loss``, ``_compute_per_token_adv_loss``, ``compute_kl_divergence``).

For the k-th chosen step of every row (the estimator's token_logp (B, K, T), every position still masked before
the step): the kept tokens are those with log p >= log(``low_prob_threshold``), judged on the current log-probs
when there is one update per batch and on the old ones otherwise, plus every token committed at the step
itself, kept whatever its probability. Per token::

    l_i = -A log p_i                                   (one inner update: REINFORCE)
    l_i = -min(r_i A, clip(r_i, 1 - lo, 1 + hi) A)      (more: PPO-clip, r_i = p_i / p_old,i)
    l_i += beta k3(log p_i - log p_ref,i)

``loss_norm: token``: per chosen-step index k, the token mean over the batch's kept tokens, then / K (each step
index its own backward in Drift, one optimizer step); ``sample``: per row the token mean, averaged over rows,
then / K. Both pool over the micro-batch, so they are Drift's exactly when a micro-batch holds the batch (the
trainer weighs micro-batches by their rows). Shapes: B rows, K chosen steps, T completion tokens.
"""

from __future__ import annotations

import math

import torch

from ..batch import LossOutput, RolloutBatch
from ..estimators.replay import replay_masks
from ..ops import clipped_policy_loss, kl_penalty
from . import policy_loss


def kept_tokens(hidden: torch.Tensor, now: torch.Tensor, judged: torch.Tensor, threshold: float) -> torch.Tensor:
    """Drift's low-probability filter: hidden (B, K, T) positions with log p >= log(threshold) (``judged``), and
    every token committed at the step (``now``) whatever its probability."""
    if threshold <= 0:
        return hidden
    return (hidden & (judged >= math.log(threshold))) | now


@policy_loss("replay_pg")
def replay_pg(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """RLDF over the chosen steps: REINFORCE (one update) or PPO-clip (more) + beta k3, Drift's normalisation."""
    cfg = algo.config
    k = inner_step % len(batch.noise)
    steps = batch.noise[k]["steps"].to(batch.completion_ids.device)
    est = algo.estimator.estimate(policy, batch, batch.noise[k])
    logp, old = est.token_logp, batch.old_logp[k].to(est.token_logp.dtype)
    b, n, t = logp.shape
    counted = batch.completion_mask[:, None]
    hidden = replay_masks(batch.commit_step, steps) & counted
    now = (batch.commit_step[:, None] == steps[..., None]) & (steps >= 0)[..., None] & counted
    single = cfg.inner_steps == 1
    keep = kept_tokens(hidden, now, (logp if single else old).detach(), cfg.low_prob_threshold)
    adv = batch.advantages.to(logp.dtype)
    if single:
        token_loss = -logp * adv[:, None, None]
        ratio = torch.ones_like(logp)
    else:
        flat, stats = clipped_policy_loss(logp.reshape(b, n * t), old.reshape(b, n * t), adv, cfg.clip_low,
                                          cfg.clip_high, None)
        token_loss, ratio = flat.view(b, n, t), stats["ratio"].view(b, n, t)
    metrics = {}
    weight = keep.to(logp.dtype)
    if cfg.beta > 0:
        kl = kl_penalty(logp, batch.ref_logp[k].to(logp.dtype), cfg.kl_estimator)
        token_loss = token_loss + cfg.beta * kl
        metrics["kl_ref"] = float((kl.detach() * weight).sum() / weight.sum().clamp(min=1))
    summed = token_loss * weight
    if cfg.loss_norm == "token":  # per step index: the batch's kept tokens pooled
        per_step = summed.sum((0, 2)) / weight.sum((0, 2)).clamp(min=1)
    else:  # per step index: each row's token mean, averaged over the rows
        per_step = (summed.sum(2) / weight.sum(2).clamp(min=1)).mean(0)
    loss = per_step.sum() / n
    metrics.update(
        policy_loss=float(loss.detach()),
        kept_fraction=float(weight.sum() / hidden.sum().clamp(min=1)),
        masked_per_step=float(hidden.sum(-1).double().mean()),
        ratio_mean=float((ratio.detach() * weight).sum() / weight.sum().clamp(min=1)),
        entropy=float((est.entropy * weight).sum() / weight.sum().clamp(min=1)),
    )
    return LossOutput(loss=loss, weight=float(b), metrics=metrics)
