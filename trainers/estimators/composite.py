"""EBPO's all-block stratified composite ELBO for block diffusion (LLaDA2.1 report): ``block_composite_elbo``.

Every draw masks at least one token in *every* response block. The n x nb (draw, block) cells of a row get
levels u_c = (o + c / C) mod 1 with c = j nb + b, C = n nb and one offset o per row; block b of B_b counted
tokens masks m = min(floor(u B_b) + 1, B_b) of them, weight B_b / m. m is uniform on {1..B_b}, so each block's
term is an unbiased ELBO of that block given the clean earlier blocks; the estimate is their sum, averaged
over the n draws, and the cyclic offset stratifies every block's levels across the draws. Blocks follow the
global position grid (positions counted from the first real prompt token, as at rollout). The masks are
derived in :meth:`BlockCompositeELBO.estimate` from stored uniforms because the grid depends on the policy's
block size. Present tokens outside ``completion_mask`` (tail after EOS) are masked in the input, never scored.
"""

from __future__ import annotations

import torch

from ..api import estimator
from ..batch import Estimate, RolloutBatch
from ..training.sequences import build_layout
from .elbo import BlockELBO


def rank_within(u: torch.Tensor, group: torch.Tensor, member: torch.Tensor) -> torch.Tensor:
    """Rank of each ``u`` (B, n, T) among the members (B, T) of its group (B, T) (0 = smallest); u in [0, 1)."""
    key = (group.double()[:, None, :] + u).masked_fill(~member[:, None, :], float("inf"))
    order = key.argsort(-1).argsort(-1)  # position of each token in its row's (group, u) order
    counts = torch.zeros(group.shape, dtype=torch.long, device=group.device)
    counts = counts.scatter_add(1, group.masked_fill(~member, 0), member.long())
    starts = counts.cumsum(1) - counts  # members in earlier groups
    return order - starts.gather(1, group)[:, None, :]


@estimator("block_composite_elbo")
class BlockCompositeELBO(BlockELBO):
    """EBPO's composite ELBO: per draw, every response block masked with its own stratified level."""

    def __init__(self, samples: int = 16):
        super().__init__(samples=samples)

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """offset (B, 1) float64 (the cyclic offset o) and u (B, n, T) float64 (which tokens a cell masks)."""
        b, length = batch.completion_ids.shape
        return {"offset": torch.rand(b, 1, generator=generator, dtype=torch.float64),
                "u": torch.rand(b, self.samples, length, generator=generator, dtype=torch.float64)}

    def cells(self, batch: RolloutBatch, noise: dict[str, torch.Tensor], block: int):
        """masked (B, n, T) bool, level p (B, n, T) float64 (masked share of the token's block) and the response
        block index (B, T) counted from the row's first response block on the global position grid."""
        valid = batch.completion_mask
        layout = build_layout(batch)
        blk = layout.positions[:, layout.response] // block
        first = blk.masked_fill(~valid, torch.iinfo(blk.dtype).max).amin(1, keepdim=True)
        rb = (blk - first).clamp(min=0).masked_fill(~valid, 0)
        n_blocks = (rb.masked_fill(~valid, -1).amax(1, keepdim=True) + 1).clamp(min=1)  # (B, 1)
        sizes = torch.zeros(rb.shape, dtype=torch.float64, device=rb.device).scatter_add(1, rb, valid.double())
        size = sizes.gather(1, rb).clamp(min=1)[:, None, :]  # (B, 1, T): B_b of each token's block
        draw = torch.arange(self.samples, device=rb.device)[None, :, None]
        cell = (draw * n_blocks[..., None] + rb[:, None, :]).double()
        level = torch.remainder(noise["offset"][..., None] + cell / (self.samples * n_blocks[..., None]), 1.0)
        count = torch.minimum((level * size).floor() + 1, size)
        rank = rank_within(noise["u"], rb, valid)
        chosen = (rank < count) & valid[:, None]
        tail = (batch.completion_attn & ~valid)[:, None]
        return chosen | tail, torch.where(chosen, count / size, torch.ones_like(level)), rb

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        if policy.block_size is None:
            raise ValueError("block_composite_elbo needs a block-diffusion model (block_size)")
        masked, level, _ = self.cells(batch, noise, policy.block_size)
        scored = (masked & batch.completion_mask[:, None]).transpose(0, 1)  # (n, B, T)
        est = self._forward(policy, batch, masked.transpose(0, 1))
        weighted = est.token_logp * scored / level.transpose(0, 1).to(est.token_logp.dtype)
        return Estimate(weighted.mean(0), est.entropy.mean(0))
