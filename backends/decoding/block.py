"""Block diffusion decoding (SDAR, LLaDA2.x): autoregressive over blocks, diffusion inside a block.

Blocks are aligned on absolute positions (block b covers positions [bK, (b+1)K) of each row, so the
first decoded block may start inside the prompt tail and rows of a left-padded batch sit at different
canvas offsets: each row's window is gathered at its own offset). Attention is block-causal. The
completed prompt blocks are prefilled into a :class:`SlotKVCache`; each finished block's K/V is
recomputed from its final tokens in one extra pass and stored (exact, thanks to the block-causal mask).
Within a block, each step proposes tokens for the window and a *rule* chooses which masked ones to commit.
Rows stop after the block in which a stop token appears (later blocks cannot change earlier ones).

NFE: ``nfe`` counts the forwards run: the prompt prefill (when a complete prompt block exists), every
denoising step, and the K/V store of each finished block that a later block reads. The official SDAR
sampler (JetAstra/SDAR@c2041a8, generate.py ``block_diffusion_generate``) also runs the store pass for the
last decoded block (the one with the stop token, or the canvas's last), whose K/V nothing reads;
``nfe_official`` counts it, one more per row. (Where the prompt ends inside a block, the official
sampler spends its per-step quotas over the whole block length, ours over the block's masked slots:
that is a decoding difference, not a counting one, and ``nfe_official`` does not model it.)
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch

from dare.backends.models.cache import SlotKVCache
from dare.harness.records import DecodingConfig

from .common import (
    COMMON,
    THRESHOLD_FLOOR,
    THRESHOLD_QUOTA,
    Canvas,
    DecodeResult,
    DecoderOptions,
    early_eos_rejection,
    sample,
    step_quotas,
    steps_per_block,
    threshold_or_quota,
    threshold_or_top1,
    top_count,
)
from .spec import decoder

NFE = ("prompt prefill + one per step + one K/V store per finished block a later block reads; nfe_official adds the "
       "official SDAR sampler's store pass of the last decoded block")


class BlockOptions(DecoderOptions):
    """CJ-GRPO's ``eos_gamma`` (EOS early rejection) and ``step_schedule`` (ascending step sizes).
    ``edits``: the loop also rewrites decoded tokens (LLaDA2.1, :class:`BlockEditingOptions`)."""

    edits: ClassVar[bool] = False
    eos_gamma: tuple[float, float] | None = None
    step_schedule: Literal["uniform", "ascending"] = "uniform"

    def step_quotas(self, cfg: DecodingConfig, masked: torch.Tensor, steps: int) -> torch.Tensor:
        return step_quotas(cfg, self.step_schedule, masked, steps)


class BlockDynamicOptions(BlockOptions):
    """``confidence_threshold`` (tau when ``threshold`` is unset) and ``threshold_rule``: ``quota`` (SDAR,
    LLaDA2.0) or ``top1`` (the lmdeploy / SGLang rule: top-1 plus all >= tau)."""

    threshold_rule: Literal["quota", "top1"] = "quota"
    confidence_threshold: float = 0.9


class BlockEditingOptions(BlockOptions):
    """LLaDA2.1: ``num_to_transfer`` (the per-step floor), ``editing_threshold`` (rewrite a decoded token whose
    new proposal's confidence exceeds it) and ``max_post_steps`` (editing steps after the block is full)."""

    edits: ClassVar[bool] = True
    num_to_transfer: int = 1
    editing_threshold: float = 0.9
    max_post_steps: int = 16


def _prefill(model, cache: SlotKVCache, tokens, positions, valid, width: int, first_block: torch.Tensor, k: int):
    """K/V of the complete prompt blocks (positions < first_block * K); returns rows that ran (B,) bool."""
    blk = positions[:, :width] // k
    allowed = valid[:, None, :width] & (blk[:, None, :] <= blk[:, :, None])
    allowed |= torch.eye(width, dtype=torch.bool, device=tokens.device)  # pad queries: no empty rows
    rows = valid[:, :width] & (positions[:, :width] < (first_block * k)[:, None])
    index = torch.arange(width, device=tokens.device).expand(tokens.shape[0], -1)
    model.net(tokens[:, :width], positions[:, :width], allowed[:, None], cache.plan(index, rows, read=False))
    return rows.any(-1)


def decode_blocks(model, canvas: Canvas, cfg: DecodingConfig, opts: BlockOptions, gens: list[torch.Generator],
                  rule) -> DecodeResult:
    """``rule(conf (B,K), candidates (B,K), quota (B,), cfg, opts) -> commit (B,K)``; with options that declare
    ``edits`` (:class:`BlockEditingOptions`, LLaDA2.1) decoded tokens are rewritten too."""
    k, gen, width, device = cfg.block_length, cfg.gen_length, canvas.gen_start, canvas.tokens.device
    batch = canvas.tokens.shape[0]
    spare = torch.arange(1, k + 1, device=device)
    tokens = torch.cat([canvas.tokens, canvas.tokens.new_full((batch, k), model.pad_id)], 1)
    valid = torch.cat([canvas.valid, canvas.valid.new_zeros(batch, k)], 1)
    positions = torch.cat([canvas.positions, canvas.positions[:, -1:] + spare], 1)
    in_gen = torch.zeros_like(valid)
    in_gen[:, canvas.gen_slice] = True
    pad = width - canvas.prompt_len
    first_block = canvas.prompt_len // k
    n_blocks = (canvas.prompt_len + gen - 1) // k - first_block + 1
    n_steps = steps_per_block(cfg)
    commit_step = torch.full((batch, gen), -1, dtype=torch.long, device=device)
    block_of = torch.zeros((batch, gen), dtype=torch.long, device=device)
    nfe = torch.zeros(batch, dtype=torch.long, device=device)
    unstored = torch.zeros_like(nfe)  # decoded blocks without a store pass: the official sampler runs one
    row_step = torch.zeros(batch, dtype=torch.long, device=device)
    finished = torch.zeros(batch, dtype=torch.bool, device=device)
    stop_ids = torch.tensor(model.stop_ids, device=device)
    eye = torch.eye(k, dtype=torch.bool, device=device)

    cache = SlotKVCache(model.net.args.n_layers, batch, tokens.shape[1], device)
    with torch.no_grad():
        nfe += _prefill(model, cache, tokens, positions, valid, width, first_block, k).long()
        for t in range(int(n_blocks.max())):
            active = (t < n_blocks) & ~finished
            if not active.any():
                break
            base = (first_block + torch.minimum(torch.tensor(t, device=device), n_blocks - 1)) * k + pad
            idx = base[:, None] + torch.arange(k, device=device)
            win, wpos = tokens.gather(1, idx), positions.gather(1, idx)
            wvalid, wgen = valid.gather(1, idx), in_gen.gather(1, idx) & active[:, None]
            seen = (cache.filled & valid)[:, None, None, :].expand(-1, 1, k, -1)
            attn = torch.cat([seen, (wvalid[:, None, :] | eye)[:, None]], dim=-1)
            win_block = _decode_window(model, win, wpos, wgen, attn, cache, cfg, opts, gens, rule, n_steps,
                                       row_step, nfe, commit_step, idx - width)
            tokens.scatter_(1, idx, win_block)
            rows, cols = wgen.nonzero(as_tuple=True)
            block_of[rows, idx[rows, cols] - width] = t
            finished |= active & (torch.isin(win_block, stop_ids) & wgen).any(-1)
            store = active & ~finished & (t + 1 < n_blocks)
            if store.any():  # final K/V of the finished block, read by every later block
                model.net(win_block, wpos, attn, cache.plan(idx, wvalid & store[:, None]))
                nfe += store.long()
            unstored += (active & ~store).long()
    out = tokens[:, canvas.gen_slice]
    out = out.masked_fill(out == model.mask_id, model.eos_id)  # rows stopped early: the rest is EOS
    return DecodeResult(out, commit_step, block_of, nfe, nfe + unstored)


def _decode_window(model, win, wpos, wgen, attn, cache, cfg, opts, gens, rule, n_steps, row_step, nfe, commit_step,
                   gidx):
    """Denoise one window (B, K) in place of a copy; updates row_step, nfe, commit_step; returns tokens."""
    win = win.clone()
    masked = (win == model.mask_id) & wgen
    quotas = opts.step_quotas(cfg, masked.sum(-1), n_steps)
    editing = opts.edits
    max_post = opts.max_post_steps if editing else 16
    post = torch.zeros_like(row_step)
    running = wgen.any(-1) & (masked.any(-1) | editing)
    step = 0
    while running.any() and step < opts.max_steps(4 * win.shape[1] + max_post):
        post += (running & ~masked.any(-1)).long()
        running &= masked.any(-1) | (post <= max_post)
        if not running.any():
            break
        logits = model.net(win, wpos, attn, cache.plan(read=True))
        x0, p_filtered, p_plain = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
        conf = p_filtered if model.arch.filtered_confidence else p_plain
        conf = early_eos_rejection(conf, x0, min(step, n_steps - 1), n_steps, cfg, opts.eos_gamma, opts.step_schedule,
                                   model)
        quota = quotas[:, min(step, n_steps - 1)] if not editing else None
        commit = rule(conf, masked & running[:, None], quota, cfg, opts)
        edit = torch.zeros_like(commit)
        if editing:
            decoded = wgen & ~masked & running[:, None]
            edit = decoded & (conf > opts.editing_threshold) & (x0 != win)
        write = commit | edit
        win = torch.where(write, x0, win)
        rows, cols = (write & wgen).nonzero(as_tuple=True)
        commit_step[rows, gidx[rows, cols]] = row_step[rows]
        nfe += running.long()
        row_step += running.long()
        masked = (win == model.mask_id) & wgen
        running &= masked.any(-1) | (editing & edit.any(-1))
        step += 1
    return win


@decoder("block:low_confidence_static", loop=decode_blocks, reads=COMMON, options=BlockOptions, nfe=NFE)
def static(conf, candidates, quota, cfg, opts):
    """Top ``quota`` per step (SDAR low_confidence_static)."""
    return top_count(conf, candidates, quota)


@decoder("block:low_confidence_dynamic", loop=decode_blocks, reads=COMMON | {"threshold"},
         options=BlockDynamicOptions, rules={"threshold": THRESHOLD_QUOTA}, nfe=NFE, aliases=("block:threshold",))
def dynamic(conf, candidates, quota, cfg, opts: BlockDynamicOptions):
    """SDAR low_confidence_dynamic / LLaDA2.0: all above tau if at least the quota, else the top quota.
    ``extra.threshold_rule: top1`` switches to the lmdeploy/SGLang rule (top-1 plus all >= tau)."""
    tau = cfg.threshold if cfg.threshold is not None else opts.confidence_threshold
    if opts.threshold_rule == "top1":
        return threshold_or_top1(conf, candidates, tau)
    return threshold_or_quota(conf, candidates, tau, quota)


@decoder("block:low_confidence", loop=decode_blocks, reads=COMMON | {"threshold"}, options=BlockDynamicOptions,
         rules={"threshold": THRESHOLD_QUOTA}, nfe=NFE)
def low_confidence(conf, candidates, quota, cfg, opts: BlockDynamicOptions):
    """``low_confidence``: dynamic when a threshold is set, static otherwise."""
    return (dynamic if cfg.threshold is not None else static)(conf, candidates, quota, cfg, opts)


@decoder("block:sequential", loop=decode_blocks, reads=COMMON, options=BlockOptions, nfe=NFE)
def sequential(conf, candidates, quota, cfg, opts):
    """The ``quota`` left-most masked positions."""
    order = -torch.arange(conf.shape[-1], device=conf.device, dtype=conf.dtype).expand_as(conf)
    return top_count(order, candidates, quota)


@decoder("block:editing", loop=decode_blocks, reads=COMMON | {"threshold"}, options=BlockEditingOptions,
         rules={"threshold": THRESHOLD_FLOOR}, nfe=NFE, aliases=("block:joint_threshold",))
def editing(conf, candidates, quota, cfg, opts: BlockEditingOptions):
    """LLaDA2.1 mask-to-token part: all above ``threshold`` (default 0.95) else the top ``num_to_transfer``;
    the loop rewrites decoded tokens above ``editing_threshold`` (the editing options)."""
    floor = torch.full((conf.shape[0],), opts.num_to_transfer, device=conf.device)
    tau = cfg.threshold if cfg.threshold is not None else 0.95
    return threshold_or_quota(conf, candidates, tau, floor)
