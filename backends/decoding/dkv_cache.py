"""dKV-Cache (dKV-Cache-Decode) for LLaDA and Dream: delayed caching of decoded tokens' keys and values.

After Ma et al., "dKV-Cache: The Cache for Diffusion Language Models" (arXiv 2505.15781); reference
implementation horseee/dKV-Cache (commit 49a76fc): LLaDA, generation_utils/llada_dkv_cache_decode.py
``generate`` with its model file models/modeling_llada_dkv_cache_decode.py; Dream,
generation_utils/dream_generation_utils.py ``_sample`` with ``cache_type="decoded"``, ``shift_type="un"`` and
models/modeling_dream.py. Within a block, with D_j the columns holding a token (prompt, padding, decoded)
after step j (LLaDA; Dream's shifted set is in :class:`DkvForward`):

- steps 0 and 1, and every step s with s % ``dkv_refresh`` == 0, are full passes over the canvas; they
  store every column's key/value (the *refresh*);
- any other step s forwards only the columns outside D_{s-2}: a token decoded at step s-1 is recomputed
  once more with its decoded id, and its key/value is cached from then on (the *delay*). The columns of
  D_{s-2} attend as cached keys; the masked suffix is always recomputed.

``dkv_variant=prefill`` (the authors' Dream ``cache_type="prefill"``) caches only what is decoded when the
block starts, from its first pass, never refreshed: on LLaDA that is Fast-dLLM's prefix cache (tested equal).

The cache is rebuilt at every block start (the authors' Dream loop has one block: ``block_length =
gen_length`` reproduces it). This is a forward strategy (``block_forward`` of
:func:`.mdm.decode_masked_diffusion`), so every masked-diffusion commit rule runs under it
(``cache=dkv`` on the fastdllm engine). With the quota rules every row forwards the same number of
columns; with ``threshold`` / ``factor`` rows commit different counts, and a row with fewer columns is
padded with its own cached block columns, sent as queries whose keys are not written (so a row's output
does not depend on the rows beside it). The keys a call attends over are all canvas columns in canvas
order (the authors concatenate [fresh | cached]: the same set, summed in another order).

Differences from the authors' code: our canvas masks padding keys and counts RoPE positions from each
row's first real token (their LLaDA loop has no attention mask and their script runs batch 1), Dream's
per-step count uses each row's own masked count (theirs the batch mean, see :mod:`.dream`), and
classifier-free guidance is not offered (their LLaDA loop raises NotImplementedError with the cache).
NFE: one forward per step, full or cached, as the authors' loop runs it (``nfe`` = ``nfe_official``).
Shapes: B rows, L canvas length, K block length, N query columns of a cached step, V vocabulary.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from dare.harness.options import Options

from .common import Canvas
from .spec import kv_cache

DEFAULT_REFRESH = 8  # the authors' README example for LLaDA dKV-Cache-Decode (cache_reloading_step=8)


class DkvOptions(Options):
    """``extra`` options of ``cache=dkv``: ``dkv_refresh`` (a full pass every that many steps of a block,
    the authors' ``cache_reloading_step`` / Dream ``cache_steps``; their README uses 8 for LLaDA, 16 for
    Dream; ``prefill`` ignores it) and ``dkv_variant``: ``decode`` (the default) or ``prefill``."""

    dkv_refresh: int = Field(DEFAULT_REFRESH, ge=1)
    dkv_variant: Literal["decode", "prefill"] = "decode"


class DelayedKV:
    """Keys/values of every canvas column (B, Hkv, L, D) per layer, in the attention cache protocol.

    :meth:`plan` ``(None, None)`` makes the next call a full pass (store everything, attend over the
    fresh keys); ``(index (B, N), write (B, N))`` a cached pass: fresh keys of the N query columns are
    scattered to their columns where ``write`` is True, and the call attends over all L columns.
    """

    def __init__(self, n_layers: int):
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.index: torch.Tensor | None = None
        self.write: torch.Tensor | None = None

    def plan(self, index: torch.Tensor | None, write: torch.Tensor | None) -> DelayedKV:
        self.index, self.write = index, write
        return self

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.index is None:
            self.k[layer], self.v[layer] = k, v
            return k, v
        idx = self.index[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
        keep = ~self.write[:, None, :, None]
        for buffer, new in ((self.k[layer], k), (self.v[layer], v)):
            buffer.scatter_(2, idx, torch.where(keep, buffer.gather(2, idx), new))  # padding queries write nothing
        return self.k[layer], self.v[layer]

    def finish_call(self) -> None:
        self.index = self.write = None


class DkvForward:
    """The forwards of one block (``forward(x, first) -> (logits (B, K, V), cost)``) for columns [lo, lo + K).

    Dream reads column i from the output at i - 1, so there the cached set is shifted the authors' way
    (``shift_type="un"``): column i counts as decoded when the token at i + 1 is (the last column takes
    column 0's flag; before the first step, its own), and only steps s % ``dkv_refresh`` == 0 are full
    passes (their LLaDA loop also makes step 1 one, since its step 0 stores nothing).
    """

    official_pass_after_first = False  # the authors' loops count the passes they run, as this one does

    def __init__(self, model, canvas: Canvas, cfg, opts: DkvOptions, lo: int):
        self.model, self.canvas, self.k = model, canvas, cfg.block_length
        self.shift = 1 if model.arch.shift_logits else 0
        self.lo = lo - self.shift  # first column whose output the block needs
        self.refresh = opts.dkv_refresh
        self.warmup = 0 if self.shift else 1  # steps 0..warmup are full passes
        self.prefill = opts.dkv_variant == "prefill"
        self.key_mask = canvas.valid[:, None, None, :]
        self.cache = DelayedKV(model.net.args.n_layers)
        self.step = 0
        self.decoded_last: torch.Tensor | None = None  # D_{s-1} as seen by the previous call

    def _decoded(self, x: torch.Tensor, first: bool) -> torch.Tensor:
        """Columns (B, L) whose keys may be cached after this step: decoded ones (Dream: shifted)."""
        decoded = x != self.model.mask_id
        if not self.shift:
            return decoded
        return torch.cat([decoded[:, 1:], decoded[:, -1:] if first else decoded[:, :1]], dim=1)

    def __call__(self, x: torch.Tensor, first: bool) -> tuple[torch.Tensor, int]:
        if first:
            self.step, self.decoded_last = 0, None
        step, stale = self.step, self.decoded_last  # stale: D_{s-2} (prefill: D at the block's start)
        self.step += 1
        if first or not self.prefill:
            self.decoded_last = self._decoded(x, first)
        if step == 0 or (not self.prefill and (step <= self.warmup or step % self.refresh == 0)):
            return self._full(x), 1
        return self._cached(x, ~stale), 1

    def _full(self, x: torch.Tensor) -> torch.Tensor:
        """A full pass over the canvas that stores every column's key/value -> block logits (B, K, V)."""
        return self.model.net(x, self.canvas.positions, self.key_mask, self.cache.plan(None, None),
                              logits_range=(self.lo, self.lo + self.k))

    def _cached(self, x: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        """A pass over the columns outside D_{s-2} (``fresh`` (B, L)) -> block logits (B, K, V)."""
        lo, hi = self.lo, self.lo + self.k
        columns = torch.arange(x.shape[1], device=x.device)
        in_block = (columns >= lo) & (columns < hi)
        n = int(fresh.sum(1).max())
        # per row: its fresh columns, then (padding) its cached block columns, then the rest; N taken, by column
        priority = fresh.long() * 2 + in_block.long()[None]
        chosen = priority.argsort(dim=1, descending=True, stable=True)[:, :n].sort(dim=1).values  # (B, N)
        write = fresh.gather(1, chosen)
        m = int((chosen < hi).sum(1).max())  # queries up to the block's end: the only logits needed
        logits = self.model.net(x.gather(1, chosen), self.canvas.positions.gather(1, chosen), self.key_mask,
                                self.cache.plan(chosen, write), logits_range=(0, m))
        target = chosen[:, :m] - lo
        target = torch.where((target >= 0) & (target < self.k), target, self.k)  # column K: discarded
        out = logits.new_zeros(x.shape[0], self.k + 1, logits.shape[-1])
        out.scatter_(1, target[..., None].expand(-1, -1, logits.shape[-1]), logits)
        return out[:, :self.k]


#: ``cache=dkv`` on LLaDA and Dream; no classifier-free guidance.
DKV = kv_cache("dkv", families=frozenset({"mdm", "dream"}), options=DkvOptions, unread=frozenset({"cfg_scale"}))(
    DkvForward)
