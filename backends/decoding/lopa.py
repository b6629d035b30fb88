"""LoPA, Lookahead Parallel Decoding, on Dream: D2F progressive blocks with look-ahead branches (``dream:lopa``).

After zhijie-group/LoPA (commit 433177a608dee8901bae0e7c02f9b6f341a6f6d0; no LICENSE file, nothing of it is
copied here): scale_dream_d2f/scale_dream_d2f.py ``DreamLoRA._generate_enhanced_speculative`` with
``_generate_additional_branches`` and ``_update_block_completion_states``, the settings of
scale_dream_d2f/test_dream_d2f_LoPA.sh (verification and base competition on, full attention).

A branch is the prompt followed by the blocks of K = block_length masks added so far; the prompt is block 0,
finished. Each round, with k = ``lopa_branching_factor``:

1. **Grow.** Every branch adds a block when its last block's decoded share is >= ``lopa_block_add_threshold``
   (not after an EOS was written, at most G / K blocks), and a block whose predecessor's share is >=
   ``lopa_decoded_token_threshold`` becomes fully activated. A branch with no mask and no active block is
   finished: the first one found ends the decode (it has the fewest rounds, the authors' choice of output).
2. **Verify.** Each branch (look-ahead branches by creation, the base last) runs one forward of its columns
   past the cached prefix, under full attention. Its confidence is ``alpha * creation + (1 - alpha) * mean of
   the lowest floor(lopa_branch_topp * n)`` confidences of its n masks past the shared finished prefix
   (alpha = ``lopa_selection_conf_alpha``); the first best one wins (ties: the earlier branch).
3. **Anchor fill** on the winner, per active block: commit the masks whose top probability is >
   ``lopa_skip_threshold``; a fully activated block where none is commits its most confident mask
   (``lopa_confidence``, the authors' ``sampling_strategy``).
4. **Spawn.** The next round's branches: look-ahead branches, each the winner plus one more mask filled (the
   most confident masks of its active blocks not filled in step 3, one each; its creation confidence is that
   position's), then a copy of the winner (creation confidence 1). A block the winner finished in step 3 is
   marked for the cache once no earlier block is active.

The KV cache holds the prompt and the finished blocks, shared by all branches: a block marked in step 4 is put
in at the next forward, its keys and values those of the winning branch's forward that round, and never
recomputed (:class:`.lopa_branches.PrefixKV`). Dream reads column i from the output at i - 1; the first column
past the cache, in a round that caches nothing, is read from the output kept when the cache last grew (the
authors' ``shared_last_logits``), not recomputed.

Quirk (``lopa_official_quirk``, default True: the authors' behaviour): ``_generate_additional_branches`` means
to spawn k - 1 look-ahead branches beside the base, but tests for the base before it is added, so it spawns k
(k + 1 branches and forwards a round; branching_factor 2 runs 3); and when no mask is left to look ahead at,
it keeps the winner as well as its base copy, two identical branches (one forward more, the same tokens).
False spawns k - 1 and no duplicate. Below 2 there is no look-ahead (plain D2F decoding with this cache).

NFE: ``nfe`` counts the forwards run (one per branch per round); ``nfe_official`` the authors' ``steps_taken``,
the rounds of the winning branch (the round that finds it finished runs no forward). The authors' loop also
runs the other branches after the winner finished; that changes neither output and is not done here. Their
round limit is commented out. Every round commits at least one token (the fallback of the first block with
masks, which is fully activated), so a decode ends within G + 1 rounds, unless a committed token is the mask
token itself (the authors do not exclude it: the column stays masked). On the random-weight tiny-dream some runs
do that for ever; here a decode stops after G + 1 rounds and returns the authors' fallback, the branch with the
most columns, masks left in it (``nfe_official`` then counts the rounds run).

Rows are decoded one at a time (each with its own branches and cache, at positions from its first real token):
a row's output does not depend on the rows beside it. T > 0 draws from the row's generator (the authors: the
global one). Tokens after an EOS that stopped the blocks are EOS. Shapes: B rows, G gen_length, V vocabulary.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from .common import COMMON, Canvas, DecodeResult, LoopOptions
from .lopa_branches import (
    ACTIVE,
    IN_CACHE,
    TO_CACHE,
    Block,
    Branch,
    PrefixKV,
    branch_confidence,
    scores,
    shared_prefix_end,
)
from .spec import decoder

NFE = ("one per branch forward (k + 1 a round with the authors' quirk); nfe_official: the authors' steps_taken, "
       "the winning branch's rounds")


class LopaOptions(LoopOptions):
    """LoPA's settings, defaults from the authors' test_dream_d2f_LoPA.sh (see the module docstring)."""

    lopa_branching_factor: int = Field(2, ge=0)
    lopa_branch_topp: float = Field(1.0, gt=0, le=1)
    lopa_selection_conf_alpha: float = Field(0.0, ge=0, le=1)
    lopa_skip_threshold: float = Field(0.9, ge=0, le=1)
    lopa_block_add_threshold: float = Field(0.1, ge=0, le=1)
    lopa_decoded_token_threshold: float = Field(0.95, ge=0, le=1)
    lopa_confidence: Literal["neg_entropy", "margin", "probability"] = "neg_entropy"
    lopa_official_quirk: bool = True


class RowDecode:
    """LoPA on one row: ``run(prompt (P,)) -> (tokens (G,), written (G,), forwards, rounds)``."""

    def __init__(self, model, cfg, opts: LopaOptions, gen: torch.Generator):
        self.model, self.cfg, self.opts, self.gen = model, cfg, opts, gen
        self.k, self.n_blocks = cfg.block_length, cfg.gen_length // cfg.block_length
        self.mask_id, self.eos_id = model.mask_id, model.eos_id

    def run(self, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        p = len(prompt)
        self.cache, self.last_logit, self.forwards = PrefixKV(self.model.net.args.n_layers), None, 0
        branches = [Branch(prompt.clone(), torch.full_like(prompt, -1), [Block(0, p, 0, p, TO_CACHE, True)])]
        winner, rounds = None, 0
        while winner is None and rounds <= self.cfg.gen_length:  # the cap: G + 1 rounds
            rounds += 1
            for branch in branches:
                self._grow(branch)
            winner = next((b for b in branches if self._done(b)), None)
            if winner is None:
                branches = self._round(branches, rounds - 1)
        winner = winner or max(branches, key=lambda b: len(b.tokens))
        tokens = torch.full((self.cfg.gen_length,), self.eos_id, dtype=torch.long, device=prompt.device)
        written = torch.full_like(tokens, -1)
        tokens[:len(winner.tokens) - p], written[:len(winner.tokens) - p] = winner.tokens[p:], winner.written[p:]
        return tokens, written, self.forwards, rounds

    def _grow(self, branch: Branch) -> None:
        blocks = branch.blocks
        if len(blocks) - 1 < self.n_blocks and not branch.eos:
            last = blocks[-1]
            if (last.total - last.masks) / last.total >= self.opts.lopa_block_add_threshold:
                end = len(branch.tokens)
                blocks.append(Block(end, end + self.k, self.k, self.k))
                branch.tokens = torch.cat([branch.tokens, branch.tokens.new_full((self.k,), self.mask_id)])
                branch.written = torch.cat([branch.written, branch.written.new_full((self.k,), -1)])
        for before, block in zip(blocks, blocks[1:]):
            if (before.total - before.masks) / before.total >= self.opts.lopa_decoded_token_threshold:
                block.complete = True

    def _done(self, branch: Branch) -> bool:
        return not (branch.tokens == self.mask_id).any() and all(b.state != ACTIVE for b in branch.blocks)

    def _round(self, branches: list[Branch], step: int) -> list[Branch]:
        """Round ``step`` (from 0): verify every branch, anchor-fill the winner, spawn the next round's branches."""
        shared = shared_prefix_end(branches)
        layout = next((b for b in branches if b.base), branches[0])
        caching = [i for i, b in enumerate(layout.blocks) if b.state == TO_CACHE and b.end <= shared]
        store = layout.blocks[caching[-1]].end - layout.blocks[caching[0]].start if caching else 0
        results = []
        for branch in sorted(branches, key=lambda b: (b.base, b.ident)):
            logits, pending, last = self._forward(branch, shared, store)
            tail = branch.tokens[shared:]
            conf = branch_confidence(logits, tail, branch.creation, self.mask_id, self.cfg, self.opts, self.gen)
            results.append((conf, branch, logits, pending, last))
        results.sort(key=lambda r: r[0], reverse=True)  # stable: the earlier branch wins a tie
        _, best, logits, pending, last = results[0]
        if store:
            self.cache.adopt(pending)
        if store or self.last_logit is None:
            self.last_logit = last
        active = best.active_blocks()
        filled = self._anchor_fill(best, logits, shared, active, step)
        best.recount(self.mask_id, active)
        done_by_base = {i for i in active if best.blocks[i].masks == 0}
        spawned = [*self._look_ahead(best, logits, shared, active, filled, step, len(branches)),
                   best.copy(len(branches), base=True)]
        for branch in spawned:
            for i in caching:
                branch.blocks[i].state = IN_CACHE
            ids = branch.active_blocks()
            branch.recount(self.mask_id, ids)
            for i in ids:
                earlier_done = all(b.state != ACTIVE for b in branch.blocks[:i])
                if i in done_by_base and earlier_done and branch.blocks[i].masks == 0:
                    branch.blocks[i].state = TO_CACHE
        return spawned

    def _forward(self, branch: Branch, shared: int, store: int):
        """One forward of the branch's columns past the cache -> logits (T - shared, V) of the columns from
        ``shared`` on, the keys/values of its first ``store`` columns, and the output kept for the next column."""
        start = self.cache.length
        ids = branch.tokens[start:][None]
        positions = torch.arange(start, len(branch.tokens), device=ids.device)[None]
        raw = self.model.net(ids, positions, None, self.cache.plan(store))[0]
        self.forwards += 1
        last = raw[store - 1] if store else self.last_logit
        lo, hi = shared - 1 - start, len(branch.tokens) - 1 - start
        if lo >= 0:
            return raw[lo:hi], self.cache.pending, last
        first = raw.new_ones(raw.shape[-1]) if last is None else last  # the authors' placeholder: never read
        return torch.cat([first[None], raw[:hi]]), self.cache.pending, last

    def _anchor_fill(self, best: Branch, logits: torch.Tensor, shared: int, active: list[int], step: int) -> set:
        """Commit each active block's masks above the skip threshold (a fully activated block: at least its most
        confident one) on ``best``; logits (T - shared, V). Returns the columns written."""
        fills = {}
        for i in active:
            block = best.blocks[i]
            cols = (best.tokens[block.start:block.end] == self.mask_id).nonzero()[:, 0] + block.start
            cols = cols[cols >= shared]
            if not len(cols):
                continue
            conf, token, prob = scores(logits[cols - shared], self.cfg, self.opts.lopa_confidence, self.gen)
            picked = (prob > self.opts.lopa_skip_threshold).nonzero()[:, 0]
            if not len(picked) and block.complete:
                picked = conf.topk(1).indices
            fills.update({int(cols[j]): int(token[j]) for j in picked})
        for col, token in fills.items():
            best.tokens[col], best.written[col] = token, step
            best.eos |= token == self.eos_id
        return set(fills)

    def _look_ahead(self, best: Branch, logits: torch.Tensor, shared: int, active: list[int], filled: set,
                    step: int, ident: int) -> list[Branch]:
        """Branches that each fill one more of the most confident remaining masks of ``best``'s active blocks."""
        k = self.opts.lopa_branching_factor
        if k < 2:
            return []
        quirk = self.opts.lopa_official_quirk
        cols = [c for i in active for c in range(best.blocks[i].start, best.blocks[i].end)
                if best.tokens[c] == self.mask_id and c not in filled and c >= shared]
        ranked = []
        if cols:
            conf = scores(logits[torch.tensor(cols) - shared], self.cfg, self.opts.lopa_confidence, self.gen)[0]
            ranked = sorted(zip(conf.tolist(), cols), key=lambda c: c[0], reverse=True)[:k if quirk else k - 1]
        if not ranked:
            return [best.copy(best.ident, base=True)] if quirk else []  # the authors keep the winner twice
        spawned = []
        for n, (_, col) in enumerate(ranked):
            branch = best.copy(ident + n, base=False)
            conf, token, _ = scores(logits[col - shared][None], self.cfg, self.opts.lopa_confidence, self.gen)
            branch.tokens[col], branch.written[col] = token[0], step
            branch.creation, branch.eos = conf.item(), branch.eos or int(token[0]) == self.eos_id
            spawned.append(branch)
        return spawned


@decoder("dream:lopa", reads=COMMON, options=LopaOptions, nfe=NFE)  # its own loop, cache and forwards
def decode_lopa(model, canvas: Canvas, cfg, opts: LopaOptions, gens: list[torch.Generator], rule=None):
    """LoPA over the canvas (B, L), row by row -> tokens (B, G), the round (from 0) each was written at, the NFE."""
    rows = []
    for r, gen in enumerate(gens):
        prompt = canvas.tokens[r, :canvas.gen_start][canvas.valid[r, :canvas.gen_start]]
        rows.append(RowDecode(model, cfg, opts, gen).run(prompt))
    tokens, written = torch.stack([t for t, *_ in rows]), torch.stack([w for _, w, *_ in rows])
    device = canvas.tokens.device
    nfe = torch.tensor([f for *_, f, _ in rows], device=device)
    rounds = torch.tensor([n for *_, n in rows], device=device)
    block = (torch.arange(cfg.gen_length, device=device) // cfg.block_length).expand(len(rows), -1).clone()
    return DecodeResult(tokens, written, block, nfe, rounds)
