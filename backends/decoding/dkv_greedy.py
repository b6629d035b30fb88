"""dKV-Cache-Greedy for LLaDA: a random order fixed at each block's start lets a step recompute only the
columns it is about to commit, the ones it just committed and a few masked neighbours; every other key and
value comes from the cache.

After Ma et al., "dKV-Cache: The Cache for Diffusion Language Models" (arXiv 2505.15781); reference
implementation horseee/dKV-Cache@49a76fc, generation_utils/llada_dkv_cache_greedy.py ``generate`` with its
model file models/modeling_llada_dkv_cache_greedy.py (LLaDA only; the authors' loop supports only
``remasking="random"``). Per block of K columns and S steps:

- at the block's start each row draws its commit order: uniform numbers over its own columns (prompt and
  generation, the authors' ``torch.rand`` over the row), the block's columns sorted by them, descending;
  step s commits N_s, the next quota of that order (quotas as in :func:`.common.quota_schedule`);
- steps s with s % ``dkv_refresh`` == 0 (step 0 included) are full passes; they store every column's
  key/value;
- any other step forwards only Q_s = N_{s-1} | N_s | W_s and writes their keys/values into the cache;
  W_s holds, for each column of N_s in commit order, up to ``dkv_window`` still-masked neighbours taken
  nearest first, alternately left and right (they may lie in later blocks). Everything else, masked columns
  included, is attended from the cache as last written: the *greedy* approximation.

The queries and the cache are :class:`.dkv_cache.DkvForward`'s (a row with fewer queries is padded with its
cached block columns, whose keys are not written), so rows stay independent. This is a decoder, not a
variant of ``cache=dkv``: that cache serves any commit rule, while this forward has to know before the pass
which columns the step will commit, which only the fixed order gives. Proposals are argmax at temperature 0
(Gumbel-max from the row's generator above it; the authors draw from the global one over the queried
columns, so parity holds at temperature 0). A row seeded s draws the order the authors draw after
``torch.manual_seed(s)``. Classifier-free guidance is not offered (the authors' cached loop raises).
Defaults are the authors' README example (``--cache-steps 2 --window-size 4``).
NFE: one forward per step, full or cached, as the authors' loop runs it (``nfe`` = ``nfe_official``).
Shapes: B rows, L canvas length, K block length, S steps per block.
"""

from __future__ import annotations

import torch
from pydantic import Field

from .common import COMMON, DecoderOptions, quota_schedule, sample, steps_per_block
from .dkv_cache import DkvForward, DkvOptions
from .mdm import decode_masked_diffusion
from .spec import decoder


class DkvGreedyOptions(DecoderOptions):
    """``dkv_refresh``: a full pass every that many steps of a block (the authors' ``cache_reloading_step``);
    ``dkv_window``: masked neighbours recomputed per column about to be committed (their ``window_size``)."""

    dkv_refresh: int = Field(2, ge=1)
    dkv_window: int = Field(4, ge=0)


class _Order:
    """Each row's commit order within the current block: ``rank`` (B, K), a column's place in the order, and
    ``done`` (B, S + 1), how many of the order are committed before each step."""

    def __init__(self, canvas, gens: list[torch.Generator], steps: int):
        self.canvas, self.gens, self.steps = canvas, gens, steps
        self.rank: torch.Tensor | None = None
        self.done: torch.Tensor | None = None

    def draw(self, lo: int, masked: torch.Tensor) -> None:
        """Draw the order of the block at canvas column ``lo`` (masked (B, K) at its start)."""
        k, offset = masked.shape[1], lo - self.canvas.gen_start
        ranks = []
        for r, gen in enumerate(self.gens):
            start = int(self.canvas.prompt_len[r]) + offset
            uniform = torch.rand(int(self.canvas.prompt_len[r]) + self.canvas.gen_length, generator=gen,
                                 device=gen.device)
            order = uniform[start:start + k].sort(descending=True, stable=True).indices
            ranks.append(torch.empty_like(order).scatter_(0, order, torch.arange(k, device=order.device)))
        self.rank = torch.stack(ranks).to(masked.device)
        quotas = quota_schedule(masked.sum(-1), self.steps)
        self.done = torch.cat([torch.zeros_like(quotas[:, :1]), quotas.cumsum(-1)], -1)

    def commits(self, step: int) -> torch.Tensor:
        """N_step (B, K): the block columns committed at ``step``."""
        if step >= self.steps:
            return torch.zeros_like(self.rank, dtype=torch.bool)
        return (self.rank >= self.done[:, step, None]) & (self.rank < self.done[:, step + 1, None])


class GreedyForward(DkvForward):
    """The block's forwards ``(x (B, L), first) -> (logits (B, K, V), cost)`` under the fixed order."""

    def __init__(self, model, canvas, cfg, opts: DkvGreedyOptions, lo: int, order: _Order):
        super().__init__(model, canvas, cfg, DkvOptions(dkv_refresh=opts.dkv_refresh), lo)
        self.order, self.window = order, opts.dkv_window

    def __call__(self, x: torch.Tensor, first: bool) -> tuple[torch.Tensor, int]:
        if first:
            self.step = 0
            self.order.draw(self.lo, x[:, self.lo:self.lo + self.k] == self.model.mask_id)
        step = self.step
        self.step += 1
        if step % self.refresh == 0:
            return self._full(x), 1
        return self._cached(x, self._queries(x, step)), 1

    def _queries(self, x: torch.Tensor, step: int) -> torch.Tensor:
        """Q_s (B, L): the columns committed at step - 1 and at step, and the latter's masked neighbours."""
        now = self.order.commits(step)
        fresh = torch.zeros_like(x, dtype=torch.bool)
        fresh[:, self.lo:self.lo + self.k] = self.order.commits(step - 1) | now
        if self.window:
            for r in range(x.shape[0]):
                columns = now[r].nonzero()[:, 0]
                in_order = (columns[self.order.rank[r, columns].argsort()] + self.lo).tolist()
                open_ = ((x[r] == self.model.mask_id) & ~fresh[r]).tolist()
                for column in _neighbours(in_order, open_, self.window):
                    fresh[r, column] = True
        return fresh


def _neighbours(columns: list[int], open_: list[bool], window: int) -> list[int]:
    """Up to ``window`` open columns per column of ``columns`` (in that order, each taken once), searched
    nearest first, alternately left and right, as the authors' ``find_window_tokens`` walks."""
    taken, width = [], len(open_)
    for column in columns:
        left, right, count, go_left = column - 1, column + 1, 0, True
        while count < window:
            side = left if go_left else right
            if 0 <= side < width and open_[side]:
                open_[side] = False
                taken.append(side)
                count += 1
            if go_left:
                left -= 1
            else:
                right += 1
            go_left = not go_left
            if left < 0 and right > width:  # the authors' bound (their right pointer stops past the end)
                break
    return taken


def _policy(order: _Order):
    def commit_in_order(logits, masked, quota, step, steps, gens, cfg, opts, model):
        """logits (B, K, V), valid at the queried columns -> (N_step (B, K), x0 (B, K))."""
        x0, _, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
        return order.commits(step), x0

    return commit_in_order


NFE = "one per forward (full or cached pass) of a step; nfe_official the same"


@decoder("mdm:dkv_greedy", reads=COMMON, options=DkvGreedyOptions, nfe=NFE)  # its own cached forward
def decode_dkv_greedy(model, canvas, cfg, opts: DkvGreedyOptions, gens, rule=None):
    """dKV-Cache-Greedy through :func:`.mdm.decode_masked_diffusion` with :class:`GreedyForward`."""
    order = _Order(canvas, gens, steps_per_block(cfg))
    return decode_masked_diffusion(model, canvas, cfg, opts, gens, _policy(order),
                                   lambda lo: GreedyForward(model, canvas, cfg, opts, lo, order))
