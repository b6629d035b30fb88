"""Fast-dLLM key/value caches for bidirectional dLLMs (LLaDA, Dream), refreshed once per block.

Both speak the attention layers' cache protocol (``update(layer, k, v) -> (k_all, v_all)`` per layer and
``finish_call()`` once per forward, see :mod:`dare.backends.models.cache`). Every row of a left-padded
:class:`~dare.backends.decoding.common.Canvas` decodes the same canvas columns at the same time, so a
block is one contiguous column range for the whole batch and the caches can slice instead of the
per-row scatters of :class:`~dare.backends.models.cache.SlotKVCache`; slicing acts on the column axis
only, so rows never mix. Shapes: k/v (B, Hkv, L, D), L the canvas length.

A cache is built for one block: the first forward (the block-start full pass over the whole canvas)
*fills* it, every later forward *reads* it.
"""

from __future__ import annotations

import torch


class PrefixCache:
    """Keys/values of canvas columns [0, P) from the block-start pass (P = ``first``); later calls send
    columns [P, L).

    The keys a read call attends over are ``[cached 0..P-1 | fresh P..L-1]``: the full canvas, in order,
    so the caller's key mask is the same (B, 1, 1, L) validity mask as for a full pass.
    """

    def __init__(self, n_layers: int, first: int, end: int):
        self.prefix_length = first
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.filling = True

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.filling:
            self.k[layer] = k[:, :, :self.prefix_length]
            self.v[layer] = v[:, :, :self.prefix_length]
            return k, v
        return torch.cat([self.k[layer], k], dim=2), torch.cat([self.v[layer], v], dim=2)

    def finish_call(self) -> None:
        self.filling = False

    def query_columns(self, length: int) -> tuple[int, int]:
        """Canvas columns a read call sends: everything after the cached prefix."""
        return self.prefix_length, length


class DualCache:
    """Keys/values of every canvas column from the block-start pass; later calls send the columns
    [lo, hi) of the active window, whose fresh keys overwrite their slots in place (so the next step
    sees the newest window keys) while the prefix and the masked suffix stay frozen until the next block.
    """

    def __init__(self, n_layers: int, first: int, end: int):
        self.window = (first, end)
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.filling = True

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.filling:
            self.k[layer], self.v[layer] = k, v
            return k, v
        lo, hi = self.window
        self.k[layer][:, :, lo:hi] = k
        self.v[layer][:, :, lo:hi] = v
        return self.k[layer], self.v[layer]

    def finish_call(self) -> None:
        self.filling = False

    def query_columns(self, length: int) -> tuple[int, int]:
        """Canvas columns a read call sends: the active window only."""
        return self.window


#: ``DecodingConfig.cache`` -> cache class, built per block as ``cls(n_layers, first, end)`` where
#: [first, end) are the columns whose outputs or keys the block's steps recompute.
CACHES = {"prefix": PrefixCache, "dual": DualCache}
