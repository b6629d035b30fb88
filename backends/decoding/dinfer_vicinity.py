"""dInfer's vicinity KV refresh (``dinfer_cache=vicinity``) for the LLaDA dInfer decoders.

Re-implemented from inclusionAI/dInfer@fce4e32, python/dinfer/decoding/generate_uniform.py
(``VicinityCacheIteration.forward``, ``VicinityCacheDiffusionLLM``) and utils.py
(``DiffusionKVCacheManager.require_update`` / ``get_key_values``, ``KVCache.update``), with their dual cache
(``benchmark_dataset.py --config 3``: looks 16 / 16, warm-up 4, no periodic refresh). One dInfer iteration of a row:

- its first ``dinfer_warmup_steps`` iterations (the counter is per decode, across blocks) are full forwards;
- then a *refresh* when nothing is stored yet, or when ``require_update`` holds and the block is not the first:
  a full forward whose commits are made and whose keys/values are stored; ``require_update`` is true on a
  block other than the one it last saw, or (``dinfer_cache_update_freq`` set) when the counter is a multiple of
  it. Like theirs it is not asked on the call that stores the first cache, so it sees the block as new on the
  next iteration (a second refresh when that is not the first block), and the first block never refreshes;
- then a *window* forward of the canvas columns [s - ``dinfer_prefix_look``, e + ``dinfer_after_look``) around
  the block [s, e) (clipped to the row's prompt start and the canvas end) over the stored keys/values of every
  other column; its fresh keys/values replace the stored ones for that forward only (their non-in-place
  ``slice_scatter``), so the store keeps the last refresh's. The block's commits come from the window's logits.
  (Writing them into the store would give the same tokens: a block's windows all cover the same columns, and
  a new block refreshes first.)

A refresh iteration runs two forwards and two commit rounds (the credit rule's state sees both calls). Each
forward counts (their ``num_forwards``); those their unrolled round runs after the block filled commit
nothing and are counted in ``nfe_official`` only (a window after a refresh that filled the block included).
There is no Dream form: their vicinity class has no shifted (``use_shift``) loop. Rows keep their own counters,
blocks and windows; rows whose windows have one width share a forward.
Shapes: B rows, R rows in a forward, L canvas length, W window width, K block length, H heads, D head size.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, field_validator

from dare.harness.options import Options

from .common import Canvas

FULL, REFRESH, WINDOW = 0, 1, 2  # the forward a row's next pass runs


class VicinityOptions(Options):
    """``dinfer_cache`` (``none``: every forward over the whole canvas; ``vicinity``: the refresh above) and its
    settings, defaults from their benchmark config 3 (``dinfer_cache_update_freq`` None: refresh on a new block
    only, their default)."""

    dinfer_cache: Literal["none", "vicinity"] = "none"
    dinfer_prefix_look: int = Field(16, ge=0)
    dinfer_after_look: int = Field(16, ge=0)
    dinfer_warmup_steps: int = Field(4, ge=0)
    dinfer_cache_update_freq: int | None = Field(None, ge=1)

    def forwards(self) -> type | None:
        return CACHES[self.dinfer_cache]


class NoVicinityOptions(Options):
    """Dream's ``dinfer_cache``: ``none`` only, anything else refused in one line (their vicinity class has no
    shifted loop)."""

    dinfer_cache: Literal["none"] = "none"

    @field_validator("dinfer_cache", mode="before")
    @classmethod
    def _refuse(cls, value):
        if value != "none":
            raise ValueError("dInfer's vicinity cache runs LLaDA only (their VicinityCacheDiffusionLLM has no shifted "
                             "Dream loop); leave dinfer_cache unset or use an mdm model")
        return value

    def forwards(self) -> type | None:
        return None


class StoredKV:
    """Each row's keys/values of every canvas column (B, H, L, D) per layer, from its last refresh, in the
    attention cache protocol. ``plan(rows, store)`` before a full forward of ``rows`` (R,) stores the rows where
    ``store`` (R,) is True; ``plan(rows, None, index)`` before a window forward attends over the stored columns
    with the window's ``index`` (R, W) columns replaced by the fresh ones, leaving the store as it was."""

    def __init__(self, n_layers: int, batch: int):
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.batch = batch
        self.rows = self.store = self.index = None

    def plan(self, rows: torch.Tensor, store: torch.Tensor | None, index: torch.Tensor | None = None) -> StoredKV:
        self.rows, self.store, self.index = rows, store, index
        return self

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.index is None:
            if self.k[layer] is None:
                self.k[layer] = k.new_zeros((self.batch, *k.shape[1:]))
                self.v[layer] = v.new_zeros((self.batch, *v.shape[1:]))
            kept = self.rows[self.store]
            self.k[layer][kept], self.v[layer][kept] = k[self.store], v[self.store]
            return k, v
        idx = self.index[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
        return self.k[layer][self.rows].scatter(2, idx, k), self.v[layer][self.rows].scatter(2, idx, v)

    def finish_call(self) -> None:
        self.rows = self.store = self.index = None


class VicinityForwards:
    """The passes of dInfer's vicinity iterations: ``__call__(x, rows, blocks, cols) -> logits (R, K, V)`` runs
    each row's next pass; :attr:`ended` (R,) says which passes ended an iteration; :meth:`skip` counts the
    forwards their loop still runs on a filled block."""

    def __init__(self, model, canvas: Canvas, opts: VicinityOptions):
        batch = canvas.tokens.shape[0]
        self.model, self.canvas, self.opts = model, canvas, opts
        self.iter_no = [0] * batch  # their global iteration counter, one per row (each row decodes as alone)
        self.stored = [False] * batch
        self.seen = [None] * batch  # the block require_update saw last (their block_start / block_end)
        self.pending = [False] * batch  # a refresh ran: the iteration's window forward is next
        self.cache = StoredKV(model.net.args.n_layers, batch)
        self.first = (canvas.gen_start - canvas.prompt_len).tolist()  # each row's first prompt column
        self.end = canvas.gen_start + canvas.gen_length
        self.ended: torch.Tensor | None = None

    def _require_update(self, row: int, block: int) -> bool:
        changed, self.seen[row] = self.seen[row] != block, block
        freq = self.opts.dinfer_cache_update_freq
        return changed if freq is None else changed or self.iter_no[row] % freq == 0

    def _next(self, row: int, block: int) -> int:
        """The kind of the row's next pass; its counters move as theirs do when that pass runs."""
        if self.pending[row]:
            self.pending[row] = False
            kind = WINDOW
        elif self.iter_no[row] < self.opts.dinfer_warmup_steps:
            kind = FULL
        elif not self.stored[row] or (self._require_update(row, block) and block > 0):
            self.stored[row] = self.pending[row] = True
            kind = REFRESH
        else:
            kind = WINDOW
        self.iter_no[row] += 1
        return kind

    def skip(self, rows: torch.Tensor, blocks: torch.Tensor, iterations: torch.Tensor) -> torch.Tensor:
        """Forwards (R,) their round still runs on the filled blocks of ``rows``: the window owed by a refresh,
        then ``iterations`` (R,) more (less the one that window ends). Nothing they compute is read later: a
        later block refreshes before its first window."""
        counts = []
        for row, block, left in zip(rows.tolist(), blocks.tolist(), iterations.tolist()):
            count = 0
            while left > 0:
                kind = self._next(row, block)
                count += 1
                left -= kind != REFRESH
            counts.append(count)
        return torch.tensor(counts, dtype=torch.long, device=rows.device)

    def __call__(self, x: torch.Tensor, rows: torch.Tensor, blocks: torch.Tensor, cols: torch.Tensor,
                 span: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Logits (R, K, V) at ``cols`` (R, K) of ``rows`` (R,) in ``blocks`` (R,), whose canvas columns are
        ``span`` [s, e) (R,) each (an aligned first block starts inside the prompt)."""
        kinds = torch.tensor([self._next(r, b) for r, b in zip(rows.tolist(), blocks.tolist())], device=x.device)
        self.ended = kinds != REFRESH
        out: list[tuple[torch.Tensor, torch.Tensor]] = []
        full = (kinds != WINDOW).nonzero()[:, 0]
        if len(full):
            out.append((full, self._full(x, rows[full], cols[full], kinds[full] == REFRESH)))
        window = (kinds == WINDOW).nonzero()[:, 0]
        first = torch.tensor([self.first[r] for r in rows[window].tolist()], dtype=torch.long, device=x.device)
        left = torch.maximum(first, span[0][window] - self.opts.dinfer_prefix_look)
        right = (span[1][window] + self.opts.dinfer_after_look).clamp(max=self.end)
        for width in (right - left).unique().tolist():
            part = window[right - left == width]
            out.append((part, self._window(x, rows[part], cols[part], left[right - left == width], width)))
        logits = torch.empty(len(rows), *out[0][1].shape[1:], dtype=out[0][1].dtype, device=x.device)
        for index, part in out:
            logits[index] = part
        return logits

    def _full(self, x, rows, cols, store) -> torch.Tensor:
        """A forward of the whole canvas of ``rows`` (R,), storing the keys/values of the ``store`` (R,) rows ->
        logits (R, K, V) at ``cols`` (R, K)."""
        canvas = self.canvas
        hidden = self.model.net.hidden_states(x[rows], canvas.positions[rows], canvas.valid[rows][:, None, None, :],
                                              self.cache.plan(rows, store))
        return self.model.net.lm_head(hidden.gather(1, cols[..., None].expand(-1, -1, hidden.shape[-1])))

    def _window(self, x, rows, cols, left, width) -> torch.Tensor:
        """A forward of the window columns [left, left + width) (R,) of ``rows`` over their stored keys/values ->
        logits (R, K, V) at ``cols`` (R, K)."""
        index = left[:, None] + torch.arange(width, device=x.device)
        hidden = self.model.net.hidden_states(x[rows[:, None], index], self.canvas.positions[rows[:, None], index],
                                              self.canvas.valid[rows][:, None, None, :],
                                              self.cache.plan(rows, None, index))
        at = (cols - left[:, None]).clamp(0, width - 1)
        return self.model.net.lm_head(hidden.gather(1, at[..., None].expand(-1, -1, hidden.shape[-1])))


#: ``dinfer_cache`` -> the forwards of an iteration (None: one forward of the whole canvas)
CACHES = {"none": None, "vicinity": VicinityForwards}
