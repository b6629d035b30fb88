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

from dare.backends.models.masks import block_causal_mask, key_mask, noisy_clean_mask

from ..batch import RolloutBatch

__all__ = ["Layout", "build_layout", "block_causal_mask", "key_mask", "noisy_clean_mask"]


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
