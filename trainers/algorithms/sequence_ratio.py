"""The sequence-level policy gradient shared by EBPO and ESPO: one ratio per sequence from ELBO estimates.

Per row: E = sum of the estimator's token log-likelihoods over the counted tokens, log rho = (E - E_old) / L
(L = 1 for EBPO, the response length for ESPO), a clipped surrogate chosen by the algorithm, an optional KL
on the raw ELBOs (also / L), and the mean over the rows that have counted tokens (the trainer keeps it exact
across micro-batches through ``LossOutput.weight``).
"""

from __future__ import annotations

import torch

from ..batch import LossOutput, RolloutBatch
from ..ops import kl_penalty
from .policy_gradient import PolicyGradient


class SequenceRatio(PolicyGradient):
    """Subclasses implement :meth:`surrogate` and may rescale log-ratios and KL with :meth:`length`."""

    def length(self, mask: torch.Tensor) -> float:
        """L of log rho = (E - E_old) / L. Default 1: the ratio of the sequence likelihoods themselves."""
        return 1.0

    def surrogate(self, log_ratio: torch.Tensor, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row loss (B,) and whether the clip was taken (B,) bool, from log rho (B,) and advantages (B,)."""
        raise NotImplementedError

    def loss(self, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        cfg = self.config
        k = inner_step % len(batch.noise)
        mask = batch.completion_mask
        length = self.length(mask)
        est = self.estimator.estimate(policy, batch, batch.noise[k])
        elbo = (est.token_logp * mask).sum(1)  # E (B,)
        old = (batch.old_logp[k].to(elbo.dtype) * mask).sum(1)
        log_ratio = (elbo - old) / length
        per_row, clipped = self.surrogate(log_ratio, batch.advantages.to(elbo.dtype))
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
