"""Packed variable-length batches: drop padding and lay several sequences side by side in one row.

Works for any dense attention mask: a packed slot attends to a slot of the same source row exactly when
the source mask allowed it, and never across rows, so the packed forward computes the same function as
the padded one while skipping the padding's compute. A token is kept if it attends to, or is attended by,
another token (or is listed in ``needed``); pads see and are seen only by themselves (the masks'
diagonal) and are dropped. Outputs read at dropped positions are placeholders (callers mask them out).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Packing:
    """ids/positions (P, C); mask (P, 1, C, C); where (B, L, 2) long: (packed row, slot) of each source
    token, (-1, -1) if dropped."""

    ids: torch.Tensor
    positions: torch.Tensor
    mask: torch.Tensor
    where: torch.Tensor


def pack(ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, needed: torch.Tensor) -> Packing:
    """ids/positions (B, L); mask (B, 1, L, L) bool; needed (B, L) bool tokens whose output is read."""
    b, length = ids.shape
    device = ids.device
    eye = torch.eye(length, dtype=torch.bool, device=device)
    off = mask[:, 0] & ~eye
    keep = off.any(1) | off.any(2) | needed  # (B, L)
    counts = keep.sum(1).tolist()
    capacity = max(counts) if counts else 0
    bins: list[list[int]] = []
    room: list[int] = []
    for r in sorted(range(b), key=lambda r: -counts[r]):  # first-fit decreasing
        for i, free in enumerate(room):
            if counts[r] <= free:
                bins[i].append(r)
                room[i] -= counts[r]
                break
        else:
            bins.append([r])
            room.append(capacity - counts[r])
    bin_of = torch.zeros(b, dtype=torch.long)
    start_of = torch.zeros(b, dtype=torch.long)
    for p, rows in enumerate(bins):
        offset = 0
        for r in rows:
            bin_of[r], start_of[r] = p, offset
            offset += counts[r]
    # kept columns of each row first, in order (a stable sort of ~keep), then one scatter for every row
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices  # (B, L)
    j = torch.arange(length, device=device).expand(b, -1)
    live = j < keep.sum(1, keepdim=True)
    r_idx = torch.arange(b, device=device)[:, None].expand(-1, length)[live]
    p_idx = bin_of.to(device)[:, None].expand(-1, length)[live]
    s_idx = (start_of.to(device)[:, None] + j)[live]
    cols = order[live]
    src_row = torch.full((len(bins), capacity), -1, dtype=torch.long, device=device)
    src_pos = torch.zeros((len(bins), capacity), dtype=torch.long, device=device)
    src_row[p_idx, s_idx], src_pos[p_idx, s_idx] = r_idx, cols
    where = torch.full((b, length, 2), -1, dtype=torch.long, device=device)
    where[r_idx, cols] = torch.stack([p_idx, s_idx], dim=-1)
    real = src_row >= 0
    rows, cols = src_row.clamp(min=0), src_pos
    packed_ids = torch.where(real, ids[rows, cols], torch.zeros_like(cols))
    packed_pos = torch.where(real, positions[rows, cols], torch.zeros_like(cols))
    allowed = mask[rows[:, :, None], 0, cols[:, :, None], cols[:, None, :]]  # (P, C, C)
    allowed &= (src_row[:, :, None] == src_row[:, None, :]) & real[:, :, None]
    allowed |= torch.eye(capacity, dtype=torch.bool, device=device)
    return Packing(packed_ids, packed_pos, allowed[:, None], where)
