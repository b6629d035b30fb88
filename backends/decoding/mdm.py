"""Masked-diffusion decoding with semi-autoregressive blocks (LLaDA and Dream share this loop).

For each block of K canvas positions (in order), repeat: forward the whole canvas (bidirectional, pads
masked as keys), turn the block's logits into proposals and confidences (the *policy*), commit the
chosen masked positions. Fixed-step policies run ``steps / n_blocks`` steps per block; with a
threshold or factor the loop runs until the block is full (at least one token per step).
Fast-dLLM's caches (:mod:`.fastdllm`, :mod:`.dkv_cache`) replace :func:`_forward` through ``block_forward``.
"""

from __future__ import annotations

import torch

from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig

from .common import COMMON, Canvas, DecodeResult, LoopOptions, steps_per_block

#: the fields a masked-diffusion rule with Fast-dLLM's parallel commits reads
PARALLEL = COMMON | {"threshold", "factor"}
NFE = ("one per forward of the canvas (two with classifier-free guidance); a threshold or factor block ends when "
       "full. nfe_official: the same, plus the pass the official cached loops run after a block-start pass that "
       "filled the block")


#: On a CPU, rows go through the network in groups of about this many canvas tokens: a (B * L)-row GEMM
#: falls out of cache and runs slower per row than a few rows at a time (benchmarks/decode_batch.py,
#: ``forward``). A row's logits do not depend on the rows beside it, so grouping changes no output.
CPU_TOKENS_PER_FORWARD = 512


def _net(model, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, window: tuple[int, int]):
    """model.net over rows (B, L) in row groups on a CPU, in one call elsewhere -> logits (B, hi - lo, V)."""
    rows = max(1, CPU_TOKENS_PER_FORWARD // ids.shape[1]) if ids.device.type == "cpu" else ids.shape[0]
    if rows >= ids.shape[0]:
        return model.net(ids, positions, mask, logits_range=window)
    return torch.cat([model.net(ids[r:r + rows], positions[r:r + rows], mask[r:r + rows], logits_range=window)
                      for r in range(0, ids.shape[0], rows)])


def _forward(model, canvas: Canvas, x: torch.Tensor, cfg: DecodingConfig, lo: int, hi: int):
    """Logits (B, hi - lo, V) predicting canvas positions lo..hi-1 (Dream: read one position earlier),
    with classifier-free guidance when cfg_scale > 0; also returns the NFE spent."""
    key_mask = canvas.valid[:, None, None, :]
    shift = 1 if model.arch.shift_logits else 0  # Dream: token i is predicted by the output at i - 1
    window = (lo - shift, hi - shift)
    if cfg.cfg_scale > 0:
        prompt = canvas.valid.clone()
        prompt[:, canvas.gen_start:] = False
        uncond = x.masked_fill(prompt, model.mask_id)
        both = _net(model, torch.cat([x, uncond]), canvas.positions.repeat(2, 1), key_mask.repeat(2, 1, 1, 1), window)
        cond, unc = both.chunk(2)
        return unc + (cfg.cfg_scale + 1) * (cond - unc), 2
    return _net(model, x, canvas.positions, key_mask, window), 1


class BlockForward:
    """A block's forward ``(x (B, L), first) -> (logits (B, K, V), NFE cost)`` and its NFE convention:
    ``official_pass_after_first`` when the official loop of its kind runs one more pass after a block-start
    pass that already filled the block (NVlabs' Fast-dLLM cached loops; see :mod:`.fastdllm`)."""

    def __init__(self, run, official_pass_after_first: bool = False):
        self.run, self.official_pass_after_first = run, official_pass_after_first

    def __call__(self, x: torch.Tensor, first: bool):
        return self.run(x, first)


def decode_masked_diffusion(model, canvas: Canvas, cfg: DecodingConfig, opts: LoopOptions,
                            gens: list[torch.Generator], policy, block_forward=None) -> DecodeResult:
    """Run the block loop with ``policy(logits (B,K,V), masked (B,K), quota (B,), step, steps, gens, cfg,
    opts, model) -> (commit (B,K) bool, x0 (B,K))``; ``quota`` is None in threshold/factor mode; ``opts``
    the decoder's validated ``extra`` options.

    ``block_forward(lo) -> forward(x, first) -> (logits (B,K,V), cost)`` supplies the forward pass for the
    block starting at canvas column ``lo`` (``first`` on its first step); the default is a full uncached
    pass. Fast-dLLM's caches plug in here and leave the loop itself untouched.

    ``canvas.window = (start, stop)`` runs only the schedule's steps start..stop-1 (counted over the whole
    canvas, ``steps / n_blocks`` per block) on a canvas that already ran the earlier ones: a block resumed
    mid-way takes the remaining quotas of the schedule of its full masked count, so decoding a window and
    then the next one commits exactly what one uninterrupted decode with the same noise would (d-TreeRPO's
    branching). Commit steps stay global; fixed-step schedules only.
    """
    if block_forward is None:
        def block_forward(lo):
            return BlockForward(lambda x, first: _forward(model, canvas, x, cfg, lo, lo + cfg.block_length))

    x = canvas.tokens.clone()
    batch, gen, k = x.shape[0], cfg.gen_length, cfg.block_length
    fixed = cfg.threshold is None and cfg.factor is None
    n_steps = steps_per_block(cfg)
    max_steps = k if fixed else opts.max_steps(k)
    start, stop = canvas.window or (0, n_steps * (gen // k))
    if canvas.window is not None and not fixed:
        raise ConfigError("a decoding window needs the fixed-step schedule; unset threshold and factor")
    commit_step = torch.full((batch, gen), -1, dtype=torch.long, device=x.device)
    nfe = torch.zeros(batch, dtype=torch.long, device=x.device)
    skipped = torch.zeros_like(nfe)  # passes the official cached loops run and this loop does not
    row_step = torch.full((batch,), start, dtype=torch.long, device=x.device)
    for b in range(gen // k):
        lo = canvas.gen_start + b * k
        first, end = max(start - b * n_steps, 0), min(stop - b * n_steps, n_steps)
        if first >= end and canvas.window is not None:
            continue  # this block lies outside the window
        forward = block_forward(lo)
        masked = x[:, lo:lo + k] == model.mask_id
        # the schedule of the block's full masked count: a fresh canvas masks every valid generated slot
        quotas = opts.step_quotas(cfg, canvas.valid[:, lo:lo + k].sum(-1) if first else masked.sum(-1), n_steps)
        step = first
        while masked.any() and (step < end if fixed else step < max_steps):
            working = masked.any(-1)
            logits, cost = forward(x, first=step == 0)
            quota = quotas[:, step] if fixed else None
            commit, x0 = policy(logits, masked, quota, step, n_steps, gens, cfg, opts, model)
            commit &= masked
            block = x[:, lo:lo + k]
            x[:, lo:lo + k] = torch.where(commit, x0, block)
            commit_step[:, b * k:(b + 1) * k].masked_fill_(commit, 0)
            commit_step[:, b * k:(b + 1) * k] += commit.long() * row_step[:, None]
            nfe += cost * working.long()
            row_step += working.long()
            masked = x[:, lo:lo + k] == model.mask_id
            if step == 0 and forward.official_pass_after_first:
                skipped += cost * (working & ~masked.any(-1)).long()
            step += 1
    block_ids = (torch.arange(gen, device=x.device) // k).expand(batch, -1)
    return DecodeResult(x[:, canvas.gen_slice], commit_step, block_ids.clone(), nfe, nfe + skipped)
