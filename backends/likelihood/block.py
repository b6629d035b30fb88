"""Block diffusion (SDAR, LLaDA2 and the checkpoints on them): log p(target | context) block by block.

No author code scores likelihood tasks for block models, so DARE defines the estimate. A block-diffusion model
generates block after block, each block denoised while the blocks left of it are clean context; blocks
cover absolute positions [bK, (b+1)K) of prefix + target (K = ``block_length``, default the architecture's
block size), the context's tokens in the block that holds the boundary stay clean. So

    log p(target | context) = sum over blocks b of log p(y_b | context, y_<b),

and each term is a masked-diffusion ELBO over the block's target positions (n_b of them):

    ELBO_b = sum over non-empty subsets M of w(M) sum_{i in M} log p(y_i | block with M masked),
    w(M) = 1 / (|M| C(n_b, |M|)),

the any-order autoregressive bound (the mean over orders of the chain rule; with K = 1 it is the exact
left-to-right likelihood). Every block is scored in one row: the input is ``[noisy | clean]`` (2L) under
the training mask (:func:`~dare.backends.models.masks.noisy_clean_mask`), noisy block b seeing its own
noisy tokens and the clean blocks before it.

``mode=mc``: ``mc_num`` rows; in each, every block draws k ~ randint(1, n_b) then ``randperm(n_b)`` (LLaDA's
order), masks k of its positions and weighs their losses by n_b / k; the estimate is the mean over rows
(unbiased for the sum of ELBO_b), the stderr over rows. ``mode=exact``: every subset of every block once
(2^K - 1 rows), the sum weighted by w(M); refused above K = 12. A whole text (empty context) is the same sum.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from dare.backends.models.masks import noisy_clean_mask
from dare.harness.errors import ConfigError
from dare.harness.options import Options

from .base import Encoded, RowPlan, ScoringEstimator, mean_and_stderr, scoring_estimator, sequence

MAX_EXACT_BLOCK = 12


class BlockOptions(Options):
    """``mode`` (mc / exact), ``mc_num`` rows (mc), ``block_length`` (None: the architecture's block size),
    ``max_length`` (capped at the model's length)."""

    mode: Literal["mc", "exact"] = "mc"
    mc_num: int = Field(128, ge=1)
    block_length: int | None = Field(None, ge=1)
    max_length: int = Field(4096, ge=2)


@scoring_estimator
class BlockELBO(ScoringEstimator):
    name = "block_elbo"
    Options = BlockOptions
    families = frozenset({"block"})
    rolling = True

    def __init__(self, options: BlockOptions, arch=None):
        super().__init__(options, arch)
        self.block = options.block_length or (arch.block_size if arch is not None else None)
        if self.block is None:
            raise ConfigError("block_elbo: the model declares no block size; set likelihood.block_length")
        if options.mode == "exact" and self.block > MAX_EXACT_BLOCK:
            raise ConfigError(f"block_elbo: mode=exact enumerates 2^{self.block} - 1 rows per block; use mode=mc "
                              f"or block_length <= {MAX_EXACT_BLOCK}")

    @property
    def exact(self) -> bool:
        return self.options.mode == "exact"

    def _blocks(self, enc: Encoded) -> list[torch.Tensor]:
        """Positions of the target inside each block that holds some, left to right."""
        p, length = len(enc.prefix), len(enc.prefix) + len(enc.target)
        starts = range((p // self.block) * self.block, length, self.block)
        return [torch.arange(max(s, p), min(s + self.block, length)) for s in starts]

    def _draw(self, blocks: list[torch.Tensor], gen: torch.Generator, row: int) -> list[tuple[torch.Tensor, float]]:
        """Per block: the masked positions and their weight, for Monte-Carlo row ``row`` or subset row ``row``."""
        out = []
        for pos in blocks:
            n = len(pos)
            if self.exact:
                if row >= 2 ** n - 1:
                    continue
                chosen = pos[[(row + 1) >> j & 1 == 1 for j in range(n)]]
                out.append((chosen, 1.0 / (len(chosen) * math.comb(n, len(chosen)))))
            else:
                k = int(torch.randint(1, n + 1, (), generator=gen))
                out.append((pos[torch.randperm(n, generator=gen)[:k]], n / k))
        return out

    def plan(self, enc: Encoded, gen: torch.Generator, mask_id: int) -> RowPlan:
        """Rows of width 2L; state weight (R, 2L) float64 (each masked position's weight)."""
        seq, blocks = sequence(enc), self._blocks(enc)
        length = len(seq)
        n_rows = max(2 ** len(pos) - 1 for pos in blocks) if self.exact else self.options.mc_num
        scored = torch.zeros(n_rows, 2 * length, dtype=torch.bool)
        weight = torch.zeros(n_rows, 2 * length, dtype=torch.float64)
        for row in range(n_rows):
            for chosen, w in self._draw(blocks, gen, row):
                scored[row, chosen], weight[row, chosen] = True, w
        doubled = torch.cat([seq, seq]).repeat(n_rows, 1)
        positions = torch.arange(length).repeat(2)
        attention = noisy_clean_mask(torch.arange(length)[None], torch.ones(1, length, dtype=torch.bool),
                                     self.block)[0, 0]
        return RowPlan(doubled.masked_fill(scored, mask_id), doubled, scored, positions, attention,
                       state={"weight": weight})

    def reduce(self, enc: Encoded, plan: RowPlan, nll: torch.Tensor) -> tuple[float, float]:
        per_row = -(nll.double() * plan.state["weight"]).sum(-1)
        if self.exact:
            return per_row.sum().item(), 0.0
        return mean_and_stderr(per_row.tolist())
