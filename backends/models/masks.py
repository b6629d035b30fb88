"""Dense attention masks over token rows, shared by training forwards and likelihood scoring.

Masks are booleans (B, 1, Lq, Lk), True = may attend, with the diagonal always allowed so no query row is
empty (a padding query sees only itself). Block b of a block-diffusion model covers positions [bK, (b+1)K).
"""

from __future__ import annotations

import torch


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
