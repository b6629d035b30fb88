"""``draw_ppo``: clipped PPO averaged per masked copy of a rollout (UniGRPO as Gen-Verse/dLLM-RL@10b4fd1
``train/rl_llada.py`` ``forward_process`` runs it with ``training.method: random_masking``).

For an estimator that scores each of a row's m masked copies separately (token_logp (B, m, T), masks in the
draw's ``masked`` (B, m, T)), per copy c of row b with masked tokens M_c::

    l_c = -(1/|M_c|) sum_{i in M_c} min(r_i A_b, clip(r_i, 1 - lo, 1 + hi) A_b) + beta sum_{i in M_c} KL_i

(the policy term a token mean, the KL a token *sum*, as the official code has them), r_i = p_i / p_old,i, and
the loss is the mean of l_c over the copies that mask at least one counted token (dLLM-RL drops the others;
its mean over each micro-batch of masked copies, averaged by gradient accumulation). The KL (k3 by default)
is taken against the behaviour policy's log-probs on the same copy (``kl_to: old``, dLLM-RL) or the frozen
reference (``kl_to: reference``). Shapes: B rows, m copies, T completion tokens.
"""

from __future__ import annotations

from ..batch import LossOutput, RolloutBatch
from ..ops import clipped_policy_loss, kl_penalty
from . import policy_loss


@policy_loss("draw_ppo")
def draw_ppo(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """Per masked copy: the token-mean clipped surrogate plus beta times the token-summed KL; copies averaged."""
    cfg = algo.config
    k = inner_step % len(batch.noise)
    est = algo.estimator.estimate(policy, batch, batch.noise[k])
    logp = est.token_logp
    b, m, t = logp.shape
    masked = batch.noise[k]["masked"].to(logp.device) & batch.completion_mask[:, None]
    old = batch.old_logp[k].to(logp.dtype)
    adv = batch.advantages.to(logp.dtype).repeat_interleave(m)
    token_loss, stats = clipped_policy_loss(logp.reshape(b * m, t), old.reshape(b * m, t), adv,
                                            cfg.clip_low, cfg.clip_high, None)
    weight = masked.reshape(b * m, t).to(logp.dtype)
    count = weight.sum(-1)
    per_copy = (token_loss * weight).sum(-1) / count.clamp(min=1)
    metrics = {}
    if cfg.beta > 0:
        target = old if cfg.kl_to == "old" else batch.ref_logp[k].to(logp.dtype)
        kl = (kl_penalty(logp, target, cfg.kl_estimator).reshape(b * m, t) * weight).sum(-1)
        per_copy = per_copy + cfg.beta * kl
        metrics["kl_" + cfg.kl_to] = float(kl.detach().sum() / count.clamp(min=1).sum())
    used = count > 0
    copies = float(used.sum())
    loss = (per_copy * used).sum() / max(copies, 1.0)
    ratio = stats["ratio"]
    metrics.update(
        policy_loss=float(loss.detach()),
        clip_fraction=float((stats["clipped"] * weight).sum() / weight.sum().clamp(min=1)),
        ratio_mean=float((ratio * weight).sum() / weight.sum().clamp(min=1)),
        ratio_max_dev=float(((ratio - 1).abs() * weight).max()) if used.any() else 0.0,
        masked_per_copy=float(count[used].mean()) if used.any() else 0.0,
        entropy=float((est.entropy.reshape(b * m, t) * weight).sum() / weight.sum().clamp(min=1)),
    )
    return LossOutput(loss=loss, weight=copies, metrics=metrics)
