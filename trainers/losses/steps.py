"""``step_ppo``: MDPO's clipped policy gradient on the clean predictions of intermediate denoising states
(autonomousvision/mdpo ``mdpo_trainer.py`` ``compute_loss``).

Per chosen (row, step t) and position i masked in x_t: l_i = λ_t max(-Â r_i, -Â clip(r_i)) + β KL_i, with
r_i = p(x̂0_i | x_t) / p_old, λ_t = L / (m_t + 1e-4), m_t the masked count; the per-(row, step) loss is
Σ_i l_i c_{t,i} / (m_t + 1e-4) (c: the prediction's confidence, when ``confidence_weighting``), averaged over
the trained (row, step) pairs (``reduction: step``) or pooled over all their tokens (``pooled``). The chosen
steps, targets, confidences and step advantages come from the batch's
:class:`~dare.trainers.estimators.step_prediction.StepTargets`
(MDPO's ``prepare``), as the estimator's noise set. Shapes: B rows, K chosen steps, T tokens.
"""

from __future__ import annotations

from ..batch import LossOutput, RolloutBatch
from ..estimators.step_prediction import StepTargets, step_states
from ..ops import clipped_policy_loss, kl_penalty, masked_mean
from . import policy_loss


@policy_loss("step_ppo")
def step_ppo(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """MDPO's loss over the chosen (row, step) states."""
    cfg = algo.config
    k = inner_step % len(batch.noise)
    chosen = batch.noise[k]
    est = algo.estimator.estimate(policy, batch, chosen)
    logp, old = est.token_logp, batch.old_logp[k]
    b, n, t = logp.shape
    masked = step_states(batch.commit_step, chosen["steps"]) & batch.completion_mask[:, None, :]
    counts = masked.sum(-1).to(logp.dtype)  # m_t per (row, step), (B, K)
    length = batch.completion_mask.sum(-1, keepdim=True).to(logp.dtype)  # L per row, (B, 1)
    scale = length / (counts + 1e-4)  # λ_t = L / (m_t + 1e-4) (mdpo_trainer.py compute_loss)
    token_loss, stats = clipped_policy_loss(logp.reshape(b * n, t), old.reshape(b * n, t),
                                            chosen["advantages"].reshape(-1), cfg.clip_low, cfg.clip_high, None)
    token_loss = token_loss.view(b, n, t) * scale[..., None]
    targets = batch.extras.get("mdpo")
    metrics = targets.metrics() if isinstance(targets, StepTargets) else {}
    if cfg.beta > 0:
        kl = kl_penalty(logp, batch.ref_logp[k], cfg.kl_estimator)
        token_loss = token_loss + cfg.beta * kl
        metrics["kl_ref"] = float(masked_mean(kl.detach(), masked))
    weight = masked.to(logp.dtype)
    if cfg.confidence_weighting:
        weight = weight * chosen["confidence"].to(logp.dtype)
    summed = (token_loss * weight).sum(-1)  # (B, K)
    if cfg.reduction == "step":  # each (row, step) its own micro-batch: / (m_t + 1e-4), then the mean
        total = float((counts > 0).sum())  # a state after a row's last step has nothing to train
        loss = (summed / (counts + 1e-4)).sum() / max(total, 1.0)
    else:
        total = float(masked.sum())
        loss = summed.sum() / (total + 1e-8)
    ratio = stats["ratio"].view(b, n, t)
    metrics.update(
        clip_fraction=float(masked_mean(stats["clipped"].view(b, n, t), masked)),
        ratio_mean=float(masked_mean(ratio, masked)),
        ratio_max_dev=float(((ratio - 1).abs() * masked).max()) if masked.any() else 0.0,
        entropy=float(masked_mean(est.entropy, masked)) if est.entropy is not None else 0.0,
        masked_per_step=float(masked.sum(-1).float().mean()),
        policy_loss=float(loss.detach()),
    )
    return LossOutput(loss=loss, weight=total, metrics=metrics)
