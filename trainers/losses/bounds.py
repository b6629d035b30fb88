"""``bgpo_bounds``: BGPO's per-Monte-Carlo-sample bound surrogates (Lin et al. 2025; THU-KEG/BGPO as run in
yjyddq/DARE), one loss term per sample.

Each ELBO sample normalised by the padded response length L, l_j = ELBO_j / L, gets its own ratio against
its own old value: A > 0: r_j = 1 + (l_j - l_j_old) (the tangent of exp at 0, linear in l_j); A <= 0:
r_j = exp(l_j - l_j_old) (Jensen). Then the dual-clip PPO loss per sample, averaged over samples, and a
length-weighted mean over sequences. The terms are yielded one per sample: the trainer backpropagates each
before the next forward, so activation memory does not grow with n.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ..batch import LossOutput, RolloutBatch
from ..ops import clip_surrogate, safe_exp
from . import policy_loss


def bound_ratio(delta: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """BGPO's per-sample ratio: 1 + delta where ``positive`` (A > 0), exp(delta) elsewhere (the log-ratio
    clamped before exp); shapes (B,)."""
    return torch.where(positive, 1 + delta, safe_exp(torch.where(positive, torch.zeros_like(delta), delta)))


@policy_loss("bgpo_bounds")
def bgpo_bounds(algo, policy, batch: RolloutBatch, inner_step: int) -> Iterator[LossOutput]:
    """One term per MC sample j: sum_b L_b loss_jb / (n sum_b L_b); the last term carries the metrics.
    ``algo.samples`` is n; the batch holds n noise sets of one draw per inner step (BGPO.draw_noise)."""
    cfg, n = algo.config, algo.samples
    first = (inner_step % (len(batch.noise) // n)) * n
    mask = batch.completion_mask
    length = float(cfg.normalise_length or mask.shape[1])
    adv = batch.advantages.to(torch.float32)
    positive = adv > 0
    lengths = mask.sum(1).to(torch.float32)
    weight = float(lengths.sum())
    total, took, ratios, entropy = 0.0, 0.0, [], 0.0
    for j in range(first, first + n):
        est = algo.estimator.estimate(policy, batch, batch.noise[j])
        value = (est.token_logp * mask).sum(1) / length  # l_j (B,)
        old = (batch.old_logp[j] * mask).sum(1) / length
        ratio = bound_ratio(value - old.to(value.dtype), positive)
        per_row, clipped = clip_surrogate(ratio, adv.to(value.dtype), cfg.clip_low, cfg.clip_high, cfg.clip_c)
        term = (per_row * lengths.to(per_row.dtype)).sum() / (n * max(weight, 1e-8))
        total += float(term.detach())
        took += clipped.float() / n
        ratios.append(ratio.detach())
        if est.entropy is not None:
            entropy += est.entropy.detach() / n
        if j < first + n - 1:
            yield LossOutput(loss=term, weight=weight)
    ratio = torch.stack(ratios)
    rows = lengths > 0
    metrics = {
        "policy_loss": total,
        "clip_fraction": float((took * lengths).sum() / max(weight, 1e-8)),
        "ratio_mean": float(ratio[:, rows].mean()) if rows.any() else 1.0,
        "ratio_max_dev": float((ratio[:, rows] - 1).abs().max()) if rows.any() else 0.0,
        "entropy": float((entropy * mask).sum() / max(weight, 1e-8)) if torch.is_tensor(entropy) else 0.0,
    }
    yield LossOutput(loss=term, weight=weight, metrics=metrics)
