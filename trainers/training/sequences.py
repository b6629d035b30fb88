"""Sequence layouts and attention masks for training forwards.

A row is ``[left pad | prompt | completion]`` of length L = P + T; positions count from the first real
token (as the decoders' canvas does), so block b of a block-diffusion model covers positions
[bK, (b+1)K) exactly as at rollout time. Masks are dense booleans (B, 1, Lq, Lk), True = may attend,
with the diagonal always allowed so no query row is empty. Padding queries see only themselves, so a
padding token neither sees nor is seen by anything else (what :mod:`.packing` relies on to drop it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..batch import RolloutBatch


@dataclass
class Layout:
    """tokens (B, L) long; valid (B, L) bool (key may be attended); positions (B, L) long; prompt_width P."""

    tokens: torch.Tensor
    valid: torch.Tensor
    positions: torch.Tensor
    prompt_width: int

    @property
    def response(self) -> slice:
        return slice(self.prompt_width, self.tokens.shape[1])

    def response_index(self) -> torch.Tensor:
        """Sequence indices of the completion tokens, (B, T)."""
        width, total = self.prompt_width, self.tokens.shape[1]
        return torch.arange(width, total, device=self.tokens.device).expand(self.tokens.shape[0], -1)


def build_layout(batch: RolloutBatch) -> Layout:
    tokens = torch.cat([batch.prompt_ids, batch.completion_ids], dim=1)
    valid = torch.cat([batch.prompt_mask, batch.completion_attn], dim=1)
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    return Layout(tokens, valid, positions, batch.prompt_ids.shape[1])


def key_mask(valid: torch.Tensor) -> torch.Tensor:
    """Bidirectional attention over valid keys: (B, 1, L, L) from valid (B, L)."""
    length = valid.shape[1]
    eye = torch.eye(length, dtype=torch.bool, device=valid.device)
    return (valid[:, None, :, None] & valid[:, None, None, :]) | eye


def block_causal_mask(positions: torch.Tensor, valid: torch.Tensor, block: int) -> torch.Tensor:
    """Query in block b sees valid keys of blocks <= b: (B, 1, L, L)."""
    blk = positions // block
    allowed = valid[:, :, None] & valid[:, None, :] & (blk[:, None, :] <= blk[:, :, None])
    allowed |= torch.eye(valid.shape[1], dtype=torch.bool, device=valid.device)
    return allowed[:, None]


def noisy_clean_mask(positions: torch.Tensor, valid: torch.Tensor, block: int) -> torch.Tensor:
    """Mask of the ``[noisy | clean]`` pair (B, 1, 2L, 2L) used by block-diffusion training (BD3LM / SDAR).

    Noisy query in block b: noisy keys of block b and clean keys of blocks < b. Clean query in block b:
    clean keys of blocks <= b. Clean queries never see noisy keys.
    """
    blk = positions // block
    same = blk[:, None, :] == blk[:, :, None]
    earlier = blk[:, None, :] < blk[:, :, None]
    keys = valid[:, :, None] & valid[:, None, :]  # both query and key real
    noisy_rows = torch.cat([same & keys, earlier & keys], dim=2)
    clean_rows = torch.cat([torch.zeros_like(same), (same | earlier) & keys], dim=2)
    allowed = torch.cat([noisy_rows, clean_rows], dim=1)
    allowed |= torch.eye(allowed.shape[1], dtype=torch.bool, device=valid.device)
    return allowed[:, None]
