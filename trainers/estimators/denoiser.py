"""``coupled_denoiser``: GDSD's coupled denoiser log-likelihood (GaryBall/GDSD@3fb6780
``gdsd/trainers/gdsd_trainer_batchll.py`` ``forward_process``, ``_compute_denoise_probs_from_masked_batch``).

Draw j of n masks exactly x_j of the row's counted tokens, the counts stratified across the batch's rows as
ESPO's (one offset k ~ U{0..L} per draw, row b masking round(k + b (L + 1) / B) mod (L + 1)); the prompt is never
masked. The complement copy masks exactly the other counted tokens, so every token is scored once::

    token_logp[b, j, i] = (1/2) log p(y_i | copy that masks i)          (weighting "none", GDSD)
    token_logp[b, j, i] = (1/2) log p(y_i | that copy) / p_i            (weighting "inverse_rate", GDSD-TLC)

with p_i = x_j / (L + 1) on the masked half and L / (L + 1) - x_j / (L + 1) on the complement
(``gdsd_trainer_tlc.py``: ESPO's weights, per draw). GDSD's version has no 1/p: a "denoiser log-likelihood",
not an ELBO. TLC's centring of the logits by their detached mean changes neither the softmax nor its gradient
and is not reproduced. Per draw, not averaged: (B, n, T), as GDSD regresses each draw separately.
Two forwards per draw. Shapes: B rows, n draws, T completion tokens.
"""

from __future__ import annotations

import torch

from ..api import estimator
from ..batch import Estimate, RolloutBatch
from .espo import ESPOELBO


@estimator("coupled_denoiser")
class CoupledDenoiser(ESPOELBO):
    """GDSD: per draw (B, n, T), each token scored from the copy (stratified count or its complement) that masks
    it, halved; ``weighting="inverse_rate"`` divides by each half's mask rate (GDSD-TLC)."""

    def __init__(self, samples: int = 1, weighting: str = "none"):
        if weighting not in ("none", "inverse_rate"):
            raise ValueError(f"weighting must be 'none' or 'inverse_rate', got {weighting!r}")
        super().__init__(samples=samples, reduce_var=True, stratify="batch")
        self.weighting = weighting

    def options(self) -> dict:
        return {"samples": self.samples, "weighting": self.weighting}

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        device = batch.completion_ids.device
        valid = batch.completion_mask
        tail = (batch.completion_attn & ~valid)[None]  # masked in every copy, never scored
        masked = noise["masked"].to(device).transpose(0, 1)  # (n, B, T)
        complement = valid[None] & ~masked
        est = self._forward(policy, batch, torch.cat([masked, complement]) | tail)
        first, second = est.token_logp[:self.samples], est.token_logp[self.samples:]
        if self.weighting == "inverse_rate":
            counts = noise["counts"].to(device).T[..., None].to(first.dtype)  # (n, B, 1)
            lv = noise["lv"].to(device)[None].to(first.dtype)  # (1, B, 1)
            first = first * torch.where(counts > 0, (lv + 1) / counts.clamp(min=1), 0.0)
            second = second * torch.where(lv - counts > 0, (lv + 1) / (lv - counts).clamp(min=1), 0.0)
        token = 0.5 * (first * masked + second * complement)
        return Estimate(token.transpose(0, 1), est.entropy.mean(0))
