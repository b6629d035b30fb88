"""d2Cache (dual adaptive cache) for LLaDA and Dream: each step recomputes only a chosen set of query columns.

After Jiang et al., "d2Cache: Accelerating Diffusion-Based LLMs via Dual Adaptive Caching" (arXiv 2509.23094);
re-implemented from Kamichanw/d2Cache@72feb60: src/cache/d2cache.py ``d2Cache`` (``model_forward``,
``attention``, ``accumulate_attn_rollout``, ``on_step_end``), src/generation/vanilla.py (``generate_step``,
``confidence_unmasking``, ``vanilla_generate``), src/utils/common.py (``certainty_density``, ``nucleus_select``).

- The decode's first step is a full pass that stores every column's key/value in every layer. Later steps feed
  only the query columns through the layers; their fresh keys/values overwrite their cached ones and they
  attend over the whole cached canvas. Rows that were not queries get zero logits (probability 1/V, proposal 0).
- Commit order (the certainty prior, ``d2cache_prior_sigma``): score = confidence x D, D the certainty density
  of the decoded generation columns (:func:`.d2cache_queries.certainty_density`); the step's quota of the best
  scores among the block's masked columns is committed.
- The next step's queries, from the step just run: (1) among the still-masked columns from the block's start to
  the block boundary at or after the ``d2cache_current_k``-th masked column, the ``d2cache_current_k`` best by
  confidence x density (``d2cache_sigma``), the block's own first (Dream: the column before each, the last prompt
  column for the first generated one); (2) every column committed this step; (3) the attention-rollout nucleus
  ``d2cache_rollout_p`` over the rest; (4) gaps of at most ``d2cache_inflate_w`` columns filled.

``d2cache_official_quirks`` (default True, following the authors' code, which the parity fixtures check)
keeps three of its slips: (1) the confidences that rank stage 1 are written into a copy, so they stay those of
the first step; (2) the filter that drops columns without fresh logits from the commit candidates also acts on
a copy, so masked columns that were not recomputed stay candidates with their zero logits (with a top-quota
commit they never win: their score is 1/V); (3) their step check (``check_can_generate``) narrows the block mask
in place to the block's still-masked columns, so stage 1's window starts at the first of them, its boundaries
are multiples of their count, and only they get the in-block bonus. False refreshes the stage-1 confidences
from every recomputed masked column, commits only among recomputed columns and uses the whole block.

Differences from the authors' code: rows are decoded one at a time (their batch pads every row's queries to
the widest row's count, their stage 5, so a row's output depends on its neighbours; one row alone is what
their batch-1 run does) with each row's padding dropped. DARE's ``block_length`` and ``steps`` set the blocks
and the per-step quota: the authors' configs use block_length = gen_length (set it so to run theirs) and one
token per step (``num_transfer_tokens`` 1, steps = gen_length here). The rollout updates only the query rows
of R (the identity rows are unchanged) and runs in float32 (theirs in the model's dtype); the density is summed
directly in float64 (theirs: an FFT in float32). Their confidence is ``alg=maskgit_plus`` (the proposal's
probability); at T > 0 proposals are DARE's Gumbel-max draws.
NFE: one forward per step, full or partial, as the authors count (``nfe`` = ``nfe_official``).
Shapes: B rows (1 inside a decode), T canvas columns, G generation length, K block length, N queries, V vocabulary.
"""

from __future__ import annotations

import torch
from pydantic import Field

from .common import COMMON, Canvas, DecodeResult, LoopOptions, sample, top_count
from .d2cache_queries import Rollout, certainty_density, inflate, nucleus_select
from .dkv_cache import DelayedKV
from .mdm import BlockForward, decode_masked_diffusion
from .spec import decoder


class D2CacheOptions(LoopOptions):
    """d2Cache: ``d2cache_rollout_p`` (rollout nucleus), ``d2cache_current_k`` (masked queries per step),
    ``d2cache_sigma`` (their stage-1 density), ``d2cache_inflate_w`` (gap filling), ``d2cache_prior_sigma`` (the
    commit order's density; None: confidence alone), ``d2cache_official_quirks``; the authors' configs/cache/
    d2cache.yaml and gen_args.py values (their class signature's inflate_w default 4 is not the one they run)."""

    d2cache_rollout_p: float = Field(0.1, ge=0, le=1)
    d2cache_current_k: int = Field(32, ge=1)
    d2cache_sigma: float = Field(10.0, gt=0)
    d2cache_inflate_w: int = Field(0, ge=0)
    d2cache_prior_sigma: float | None = Field(10.0, gt=0)
    d2cache_official_quirks: bool = True


class D2Cache:
    """One row's decode state: the cached keys/values, the next step's queries and what stage 1 ranks by.

    ``block_forward(lo)`` and :meth:`policy` plug into :func:`.mdm.decode_masked_diffusion`; the forward computes
    proposals and confidences over the whole generation region (stage 1 and the density need them), the policy
    commits from the block's slice.
    """

    def __init__(self, model, canvas: Canvas, cfg, opts: D2CacheOptions, gens: list[torch.Generator]):
        self.model, self.canvas, self.cfg, self.opts, self.gens = model, canvas, cfg, opts, gens
        self.shift = 1 if model.arch.shift_logits else 0
        self.start, self.g = canvas.gen_start, cfg.gen_length
        self.cache = DelayedKV(model.net.args.n_layers)
        self.queries: torch.Tensor | None = None  # (B, N) columns of the next pass; None: a full pass
        self.stage1_conf: torch.Tensor | None = None  # (B, G)
        self.before: torch.Tensor | None = None  # the canvas (B, T) the last forward saw
        self.lo = self.last_lo = canvas.gen_start  # the block of this step and of the last forward
        # from the last forward: proposals, their confidence and whether their logits are fresh (B, G), the
        # rollout's column importance (B, T) and the commit order's density (B, G)
        self.x0 = self.p = self.fresh = self.importance = self.density = None

    def block_forward(self, lo: int) -> BlockForward:
        self.lo = lo
        return BlockForward(self.forward)

    def forward(self, x: torch.Tensor, first: bool) -> tuple[torch.Tensor, int]:
        """The canvas (B, T) -> the block's logits (B, K, V), zero in rows without a query; NFE 1."""
        if self.before is not None:
            self.queries = self._next_queries(x)
        net, c = self.model.net, self.canvas
        rollout = Rollout(x.shape[0], x.shape[1], self.queries, x.device)
        key_mask = c.valid[:, None, None, :]
        with net.attention_probe(rollout):
            if self.queries is None:
                window = (self.start - self.shift, self.start + self.g - self.shift)
                logits = net(x, c.positions, key_mask, self.cache.plan(None, None), logits_range=window)
                fresh = torch.ones(x.shape[0], self.g, dtype=torch.bool, device=x.device)
            else:
                q = self.queries
                write = torch.ones_like(q, dtype=torch.bool)  # every query's fresh key/value replaces its cached one
                rows = net(x.gather(1, q), c.positions.gather(1, q), key_mask, self.cache.plan(q, write))
                logits, fresh = self._scatter(rows, q)
        self.x0, self.p, _ = sample(logits, self.cfg.temperature, self.gens, self.cfg.top_k, self.cfg.top_p)
        self.fresh, self.importance = fresh, rollout.importance
        self.before, self.last_lo = x.clone(), self.lo
        masked = x[:, self.start:self.start + self.g] == self.model.mask_id
        if self.stage1_conf is None:
            self.stage1_conf = self.p.clone()
        elif not self.opts.d2cache_official_quirks:
            self.stage1_conf = torch.where(fresh & masked, self.p, self.stage1_conf)
        if self.opts.d2cache_prior_sigma is not None:
            self.density = certainty_density(~masked, self.opts.d2cache_prior_sigma)
        block = self.lo - self.start
        return logits[:, block:block + self.cfg.block_length], 1

    def _scatter(self, rows: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Query logits (B, N, V) -> generation logits (B, G, V) (zeros where no query predicts) and fresh (B, G)."""
        target = q + self.shift - self.start  # Dream: column j's token is read from the output at j - 1
        target = torch.where((target >= 0) & (target < self.g), target, self.g)  # row G: discarded
        out = rows.new_zeros(rows.shape[0], self.g + 1, rows.shape[-1])
        out.scatter_(1, target[..., None].expand(-1, -1, rows.shape[-1]), rows)
        fresh = torch.zeros(rows.shape[0], self.g + 1, dtype=torch.bool, device=rows.device)
        fresh.scatter_(1, target, True)
        return out[:, :self.g], fresh[:, :self.g]

    def policy(self, logits, masked, quota, step, steps, gens, cfg, opts: D2CacheOptions, model):
        """The block's slice of the forward's proposals -> (commit (B, K), x0 (B, K)) by confidence x density."""
        block = slice(self.lo - self.start, self.lo - self.start + masked.shape[1])
        score = self.p[:, block]
        if opts.d2cache_prior_sigma is not None:
            score = score * self.density[:, block]
        candidates = masked if opts.d2cache_official_quirks else masked & self.fresh[:, block]
        return top_count(score, candidates, quota), self.x0[:, block]

    def _next_queries(self, x: torch.Tensor) -> torch.Tensor:
        """Stages 1-4 after the step that saw ``self.before`` and left ``x`` (B, T) -> sorted query columns (B, N)."""
        opts, mask_id, span = self.opts, self.model.mask_id, slice(self.start, self.start + self.g)
        remaining = x[:, span] == mask_id
        columns = torch.arange(self.g, device=x.device)
        block_start = self.last_lo - self.start
        block = ((columns >= block_start) & (columns < block_start + self.cfg.block_length)).expand_as(remaining)
        committed = (self.before[:, span] == mask_id) & ~remaining
        if opts.d2cache_official_quirks:  # quirk 3: their step check narrows the block mask to its masked columns
            block = block & (self.before[:, span] == mask_id)
        size, first = block.sum(1, keepdim=True), block.long().argmax(1, keepdim=True)
        reached = remaining.long().cumsum(1) >= opts.d2cache_current_k
        kth = torch.where(reached.any(1), reached.long().argmax(1), self.g - 1)[:, None]
        window = (columns >= first) & (columns <= (kth // size + 1) * size - 1)
        score = self.stage1_conf * certainty_density(~remaining, opts.d2cache_sigma)
        score = torch.where(block, score + score.max(), score)
        count = torch.full_like(kth[:, 0], min(opts.d2cache_current_k, self.g))
        chosen = top_count(score, window & remaining, count)
        chosen_inputs = torch.cat([chosen[:, 1:], torch.zeros_like(chosen[:, :1])], 1) if self.shift else chosen
        queries = torch.zeros_like(x, dtype=torch.bool)
        queries[:, span] = chosen_inputs | committed
        queries |= nucleus_select(self.importance, opts.d2cache_rollout_p, ~queries & self.canvas.valid)
        if self.shift:  # the authors assign (not or) the last prompt column: the first generated one's predictor
            queries[:, self.start - 1] = chosen[:, 0]
        if opts.d2cache_inflate_w:
            queries = inflate(queries, opts.d2cache_inflate_w)
        return queries[0].nonzero()[:, 0][None]  # one row per decode


NFE = "one forward per step, the first over the whole canvas, later ones over the step's query columns"


def decode_d2cache(model, canvas: Canvas, cfg, opts: D2CacheOptions, gens, rule=None) -> DecodeResult:
    """d2Cache through :func:`.mdm.decode_masked_diffusion`, one row at a time (each without its left padding)."""
    results = []
    for r in range(canvas.tokens.shape[0]):
        pad = canvas.gen_start - int(canvas.prompt_len[r])
        row = Canvas(canvas.tokens[r:r + 1, pad:], canvas.valid[r:r + 1, pad:], canvas.positions[r:r + 1, pad:],
                     canvas.gen_start - pad, canvas.gen_length, canvas.prompt_len[r:r + 1])
        state = D2Cache(model, row, cfg, opts, gens[r:r + 1])
        results.append(decode_masked_diffusion(model, row, cfg, opts, gens[r:r + 1], state.policy, state.block_forward))
    return DecodeResult(*(torch.cat([getattr(res, f) for res in results]) for f in ("tokens", "commit_step", "block",
                                                                                     "nfe")))


decoder("mdm:d2cache", reads=COMMON, options=D2CacheOptions, nfe=NFE)(decode_d2cache)
decoder("dream:d2cache", reads=COMMON, options=D2CacheOptions, nfe=NFE)(decode_d2cache)
