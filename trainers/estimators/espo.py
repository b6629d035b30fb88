"""ESPO's sequence ELBO (ML-GSAI/ESPO, as run in yjyddq/DARE ``_forward_process_espo``): stratified exact mask
counts from {0..L_v} with a complementary corruption of each draw.

For a row with L_v counted tokens, k ~ U{0..L_v} and draw j of n masks exactly
x_j = (k + floor(j (L_v + 1) / n)) mod (L_v + 1) uniformly chosen counted tokens (each x_j is uniform on
{0..L_v}); with p_j = x_j / (L_v + 1) the masked term is sum_masked log p / p_j. With ``reduce_var`` the
complementary corruption (exactly the other counted tokens masked) adds sum log p / (L_v / (L_v + 1) - p_j),
and the draw's estimate is the mean of the two halves (two forwards per draw). Both halves are unbiased for a
context-free model; a half that masks nothing contributes 0. The tail after EOS is always masked in the input
and never scored.
"""

from __future__ import annotations

import torch

from ..api import estimator
from ..batch import Estimate, RolloutBatch
from .elbo import MonteCarloELBO


@estimator("espo_elbo")
class ESPOELBO(MonteCarloELBO):
    """ESPO: stratified mask counts on {0..L_v}, each draw averaged with its complementary corruption."""

    def __init__(self, samples: int = 2, reduce_var: bool = True):
        super().__init__(samples=samples)
        self.reduce_var = bool(reduce_var)
        self.forwards = self.samples * (2 if self.reduce_var else 1)

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """counts (B, n) float64 in {0..L_v}, lv (B, 1) float64 and masked (B, n, T) bool."""
        b, length = batch.completion_ids.shape
        n = self.samples
        valid = batch.completion_mask.cpu()
        lv = valid.sum(1).double()[:, None]  # (B, 1)
        k = (torch.rand(b, 1, generator=generator, dtype=torch.float64) * (lv + 1)).floor()
        counts = torch.remainder(k + torch.floor(torch.arange(n, dtype=torch.float64) * (lv + 1) / n), lv + 1)
        u = torch.rand(b, n, length, generator=generator, dtype=torch.float64).masked_fill(~valid[:, None], 2.0)
        rank = u.argsort(-1).argsort(-1)  # counted tokens first, in random order
        masked = (rank < counts[..., None]) & valid[:, None]
        return {"counts": counts, "lv": lv, "masked": masked}

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        device = batch.completion_ids.device
        valid = batch.completion_mask
        tail = (batch.completion_attn & ~valid)[None]  # always masked, never scored
        masked = noise["masked"].to(device).transpose(0, 1)  # (n, B, T)
        counts = noise["counts"].to(device).T[..., None]  # (n, B, 1)
        lv = noise["lv"].to(device)[None]  # (1, B, 1)
        halves = [(masked, counts)]
        if self.reduce_var:
            halves.append((valid[None] & ~masked, lv - counts))
        draws = torch.cat([m for m, _ in halves])  # (h n, B, T)
        est = self._forward(policy, batch, draws | tail)
        terms = []
        for i, (scored, count) in enumerate(halves):
            logp = est.token_logp[i * self.samples:(i + 1) * self.samples]
            weight = torch.where(count > 0, (lv + 1) / count.clamp(min=1), 0.0).to(logp.dtype)
            terms.append(logp * scored * weight)
        return Estimate(torch.stack(terms).mean(0).mean(0), est.entropy.mean(0))
