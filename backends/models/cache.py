"""Key/value caches the attention layers talk to through ``update(layer, k, v) -> (k_all, v_all)``.

:class:`SlotKVCache` preallocates one slot per canvas position (B, Hkv, S, D) per layer. Rows of a batch
may be at different absolute positions (left padding, per-row block alignment), so writes are per-row
scatters at ``write_index`` (B, L). A call sees ``[cached slots | new keys]`` (K = S + L); which cached
slots are visible is decided by the caller's attention mask (use :attr:`filled`). This single design
serves the exact block cache of SDAR/LLaDA2 (write a finished block) and a Fast-dLLM prefix cache
(fill the prefix once per block) or dual cache (fill everything, overwrite the active block each step).
"""

from __future__ import annotations

import torch


class SlotKVCache:
    """Post-RoPE keys and values by canvas slot. Shapes: k/v (B, Hkv, S, D); filled (B, S) bool."""

    def __init__(self, n_layers: int, batch: int, slots: int, device: torch.device | str):
        self.n_layers, self.batch, self.slots = n_layers, batch, slots
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.filled = torch.zeros(batch, slots, dtype=torch.bool, device=device)
        self.write_index: torch.Tensor | None = None
        self.write_rows: torch.Tensor | None = None
        self.read = True

    def plan(self, write_index: torch.Tensor | None = None, write_rows: torch.Tensor | None = None,
             read: bool = True) -> SlotKVCache:
        """Set up the next forward: store new k/v at ``write_index`` (B, L) for positions where
        ``write_rows`` (B, L) is True (None: none stored); ``read=False`` ignores the cached slots (K = L)."""
        self.write_index, self.write_rows, self.read = write_index, write_rows, read
        return self

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k/v (B, Hkv, L, D) of the current call -> keys/values to attend over (B, Hkv, K, D)."""
        if self.k[layer] is None:
            shape = (self.batch, k.shape[1], self.slots, k.shape[3])
            self.k[layer] = k.new_zeros(shape)
            self.v[layer] = v.new_zeros(shape)
        cached_k, cached_v = self.k[layer], self.v[layer]
        k_all = torch.cat([cached_k, k], dim=2) if self.read else k
        v_all = torch.cat([cached_v, v], dim=2) if self.read else v
        if self.write_index is not None:
            self._store(cached_k, k)
            self._store(cached_v, v)
        return k_all, v_all

    def _store(self, buffer: torch.Tensor, new: torch.Tensor) -> None:
        # keep old slot contents where write_rows is False, so one scatter serves rows with nothing to store
        idx = self.write_index[:, None, :, None].expand(-1, new.shape[1], -1, new.shape[3])
        old = buffer.gather(2, idx)
        keep = self.write_rows[:, None, :, None]
        buffer.scatter_(2, idx, torch.where(keep, new, old))

    def finish_call(self) -> None:
        """Mark the slots written by the call that just ran; called once by the model after all layers."""
        if self.write_index is not None:
            self.filled.scatter_(1, self.write_index, self.filled.gather(1, self.write_index) | self.write_rows)
        self.write_index = self.write_rows = None
        self.read = True
