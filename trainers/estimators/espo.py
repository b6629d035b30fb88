"""ESPO's sequence ELBO (ML-GSAI/ESPO, as run in yjyddq/DARE ``_forward_process_espo``): stratified exact mask
counts from {0..L_v} with a complementary corruption of each draw.

For a row with L_v counted tokens, k ~ U{0..L_v} and draw j of n masks exactly
x_j = (k + floor(j (L_v + 1) / n)) mod (L_v + 1) uniformly chosen counted tokens (each x_j is uniform on
{0..L_v}); with p_j = x_j / (L_v + 1) the masked term is sum_masked log p / p_j. With ``reduce_var`` the
complementary corruption (exactly the other counted tokens masked) adds sum log p / (L_v / (L_v + 1) - p_j),
and the draw's estimate is the mean of the two halves (two forwards per draw). Both halves are unbiased for a
context-free model; a half that masks nothing contributes 0. ESPO scores the whole completion (its algorithm
sets ``count_padding``); with ``count_padding=False`` the tail after EOS is masked in the input and not scored.
"""

from __future__ import annotations

import torch

from ..api import estimator
from ..batch import Estimate, RolloutBatch
from .elbo import MonteCarloELBO


@estimator("espo_elbo")
class ESPOELBO(MonteCarloELBO):
    """ESPO: stratified mask counts on {0..L_v}, each draw averaged with its complementary corruption.

    ``stratify="batch"`` (ML-GSAI/ESPO espo/espo_trainer.py ``forward_process``: one k ~ U{0..L} per call,
    row i of the B rows masks round(k + i (L + 1) / B) mod (L + 1) tokens; every Monte-Carlo draw is its own
    call with its own k). ``stratify="samples"`` (this package's earlier draw, preset ``espo_row_strata``):
    one k per row and the n draws of that row stratified, (k + floor(j (L_v + 1) / n)) mod (L_v + 1)."""

    def __init__(self, samples: int = 2, reduce_var: bool = True, stratify: str = "batch"):
        if stratify not in ("batch", "samples"):
            raise ValueError(f"stratify must be 'batch' or 'samples', got {stratify!r}")
        super().__init__(samples=samples)
        self.reduce_var = bool(reduce_var)
        self.stratify = stratify
        self.forwards = self.samples * (2 if self.reduce_var else 1)

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """counts (B, n) float64 in {0..L_v}, lv (B, 1) float64 and masked (B, n, T) bool."""
        b, length = batch.completion_ids.shape
        n = self.samples
        valid = batch.completion_mask.cpu()
        lv = valid.sum(1).double()[:, None]  # (B, 1)
        if self.stratify == "batch":  # one offset per draw, the rows spread over the strata
            u = torch.rand(1, n, generator=generator, dtype=torch.float64)
            k = (u * (lv + 1)).floor()  # (B, n): the same k for rows of equal length
            rows = torch.arange(b, dtype=torch.float64)[:, None]
            counts = torch.remainder(torch.round(k + rows * (lv + 1) / b), lv + 1)
        else:
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
