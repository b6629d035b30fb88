"""``denoiser_regression``: GDSD's squared regression of the clipped, length-normalised log-ratio onto psi x A
(GaryBall/GDSD@3fb6780 ``gdsd/trainers/gdsd_trainer_batchll.py`` ``GDSDTrainer.compute_loss``).

Per row b and draw j, with l the estimator's sequence sum over the counted tokens (token_logp (B, n, T))::

    D = clamp(l - l_old, log(1 - eps_low), log(1 + eps_high))          (the sequence sum, clamped before / L)
    loss = [ sum_{b,j} (D / L - psi A_b)^2 + beta sum_{b,j} (l - l_ref)^2 / 2 / (n L) ] / B

L is the padded completion length (``logits_to_keep``). Outside the band the clamp passes no gradient: with the
recipe's eps = 4e-4 a row trains only while |D| < 4e-4, in practice at the first inner update (D = 0, gradient
-2 psi A grad(l) / L). The KL is k2 on the raw sequence sums against the reference. ``LossOutput.weight`` is the
number of rows, so micro-batches combine to the batch mean. Shapes: B rows, n draws, T completion tokens.
"""

from __future__ import annotations

import math

from ..batch import LossOutput, RolloutBatch
from ..ops import kl_penalty
from . import policy_loss


@policy_loss("denoiser_regression")
def denoiser_regression(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """GDSD: squared error between the clamped log-ratio / L and psi A, plus beta k2 / (n L), averaged over rows."""
    cfg = algo.config
    k = inner_step % len(batch.noise)
    est = algo.estimator.estimate(policy, batch, batch.noise[k])
    counted = batch.completion_mask[:, None].to(est.token_logp.dtype)
    seq = (est.token_logp * counted).sum(-1)  # (B, n)
    old = (batch.old_logp[k].to(seq.dtype) * counted).sum(-1)
    rows, draws = seq.shape
    length = float(batch.completion_ids.shape[1])
    raw = seq - old
    ratio = raw.clamp(math.log1p(-cfg.clip_low), math.log1p(cfg.clip_high))
    target = cfg.psi * batch.advantages.to(seq.dtype)[:, None]
    total = ((ratio / length - target) ** 2).sum()
    metrics = {}
    if cfg.beta > 0:
        ref = (batch.ref_logp[k].to(seq.dtype) * counted).sum(-1)
        kl = kl_penalty(seq, ref, cfg.kl_estimator).sum() / (draws * length)
        total = total + cfg.beta * kl
        metrics["kl_ref"] = float(kl.detach() / rows)
    loss = total / rows
    inside = (raw.detach() - ratio.detach()).abs() == 0
    counted_tokens = batch.completion_mask.sum().clamp(min=1)
    metrics.update(policy_loss=float(loss.detach()), clip_fraction=float(1 - inside.double().mean()),
                   log_ratio_mean=float(raw.detach().mean()), sequence_logp=float(seq.detach().mean()),
                   entropy=float((est.entropy * batch.completion_mask).sum() / counted_tokens))
    return LossOutput(loss=loss, weight=float(rows), metrics=metrics)
