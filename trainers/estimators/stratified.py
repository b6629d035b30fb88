"""Stratified mask-count ELBOs of VRPO / BGPO: ``stratified_elbo`` (masked diffusion) and
``block_stratified_elbo`` (block diffusion, the ``[noisy | clean]`` forward).

For a row with L_v counted tokens, k ~ U{1..L_v} and draw j of n masks exactly
x_j = ((k + floor(j L_v / n) - 1) mod L_v) + 1 uniformly chosen counted tokens, weight 1 / p_j with
p_j = x_j / L_v (stored as ``t`` so :class:`~.elbo.MonteCarloELBO`'s forward and weighting apply unchanged).
Each draw alone is an unbiased ELBO (x_j is uniform on {1..L_v}); together the n draws cover the mask-count
range evenly, which lowers the variance against i.i.d. levels. Present tokens outside ``completion_mask``
(the tail after EOS) are always masked in the input and never scored.
"""

from __future__ import annotations

import torch

from ..api import estimator
from ..batch import RolloutBatch
from .elbo import BlockELBO, MonteCarloELBO


class StratifiedCounts:
    """Mixin over :class:`MonteCarloELBO`: stratified exact mask counts instead of i.i.d. levels."""

    samples: int

    def __init__(self, samples: int = 4):
        super().__init__(samples=samples)

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """t (B, n) float64 = x_j / L_v and masked (B, n, T) bool."""
        b, length = batch.completion_ids.shape
        n = self.samples
        valid = batch.completion_mask.cpu()
        present = batch.completion_attn.cpu()
        lv = valid.sum(1).clamp(min=1).double()[:, None]  # (B, 1)
        k = (torch.rand(b, 1, generator=generator, dtype=torch.float64) * lv).floor() + 1
        # floor, not DARE's round half-to-even: that maps two k to one count when j L_v / n ends in .5
        counts = k + torch.floor(torch.arange(n, dtype=torch.float64) * lv / n)
        counts = torch.remainder(counts - 1, lv) + 1  # (B, n) in [1, L_v]
        u = torch.rand(b, n, length, generator=generator, dtype=torch.float64).masked_fill(~valid[:, None], 2.0)
        rank = u.argsort(-1).argsort(-1)  # counted tokens first, in random order
        masked = ((rank < counts[..., None]) & valid[:, None]) | (present & ~valid)[:, None]
        return {"t": counts / lv, "masked": masked}


@estimator("stratified_elbo")
class StratifiedELBO(StratifiedCounts, MonteCarloELBO):
    """Masked-diffusion ELBO on n stratified mask counts (VRPO, BGPO); one forward per draw."""


@estimator("block_stratified_elbo")
class BlockStratifiedELBO(StratifiedCounts, BlockELBO):
    """Block-diffusion ELBO on n stratified mask counts (VRPO / BGPO for SDAR, LLaDA2)."""
