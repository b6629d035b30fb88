"""ReMix (rejection mixing) on LLaDA: still-masked inputs carry a soft embedding of their last prediction.

After "ReMix: Rejection Mixing" (arXiv 2602.22868); reference implementation Serpientw/ReMix-DLLM,
LLaDA/model/decoding.py ``decoding_remix`` (commit aea1fd91a90d9de8487ea01529359aa4ce118a14). Greedy, block by
block (K = block_length); each step of a block, with W the input embedding matrix (V, H) and M the mask id:

1. Inputs. Rows of W, except at the block's masked positions once a history P (per position, the previous
   step's probabilities) is ready: from P's top 50 keep the nucleus prefix whose cumulative probability is
   <= alpha = clamp(2 max P, 0.2, 0.9) (the top token always), s = sum_kept P_v W_v + (1 - sum_kept P_v) W_M,
   and the input is (1 - ``remix_beta``) W_M + ``remix_beta`` s.
2. Forward; x0 = argmax, conf = p(x0) under the softmax in the weights' dtype.
3. Commit the block's masked positions with conf > ``remix_threshold``, at most
   max_accept = min(max(floor(0.7 n), 5), 20) of them (the most confident; n the block's masks before the
   commit); when none passes, the single most confident.
4. History. At positions still masked, JS(P, p) in float32 (both clamped at float32 eps); P <- p, with rows
   whose JS exceeds ``remix_js_threshold`` set to zero ("rejection": a zero row gives s = W_M, a plain mask).

As in the reference: P covers the canvas and persists across blocks, so the first step of a block compares
against the previous block's last distribution; "ready" is reset at every block start (a block's first step
has plain inputs); the very first step of a decode only stores P (no JS check, and the second step still has
plain inputs); every block is decoded to the end (no EOS early stop). P is kept for the active block and the
next one only (the reference keeps all L positions; no other position is ever read).

``remix_official_quirk`` (default True, the reference's behaviour): a zeroed row is compared like any other,
and JS(0 clamped to eps, p) is about ln(2) / 2 = 0.35, above the default threshold 0.3, so a rejected position
is rejected again at every later step until it is committed. False skips the check for zeroed rows, so a
rejected position gets plain mask inputs for one step and then mixes its fresh prediction.

Rows are decoded independently (the reference runs one row), each until its block is full; a row's output
equals its batch-1 output. LLaDA only: the reference has no Dream path (``dream:remix`` is not registered).
"""

from __future__ import annotations

import torch
from pydantic import Field

from .common import DecodeResult, LoopOptions, top_count
from .spec import decoder

TOP_K = 50  # the reference's nucleus candidates per position
ALPHA_MIN, ALPHA_MAX = 0.2, 0.9  # the nucleus mass alpha = clamp(2 max p, ALPHA_MIN, ALPHA_MAX)


class RemixOptions(LoopOptions):
    """ReMix: commit threshold, JS rejection threshold and the soft-input weight (the reference's gsm8k
    configuration), and whether a rejected row stays rejected (the reference's code; see the module)."""

    remix_threshold: float = Field(0.9, ge=0, lt=1)
    remix_js_threshold: float = Field(0.3, ge=0)
    remix_beta: float = Field(0.5, ge=0, le=1)
    remix_official_quirk: bool = True


def soft_embedding(history: torch.Tensor, weight: torch.Tensor, mask_id: int) -> torch.Tensor:
    """history (B, K, V) probabilities (rows may be zero) -> nucleus soft embeddings (B, K, H)."""
    top_p, top_ids = history.topk(min(TOP_K, history.shape[-1]), dim=-1)
    alpha = (2 * top_p[..., 0]).clamp(ALPHA_MIN, ALPHA_MAX)
    keep = top_p.cumsum(-1) <= alpha[..., None]
    keep[..., 0] = True
    kept = top_p * keep
    rest = 1.0 - kept.sum(-1, keepdim=True).clamp(0.0, 1.0)
    return torch.einsum("bkn,bknh->bkh", kept, weight[top_ids]) + rest * weight[mask_id]


def js_divergence(prev: torch.Tensor, curr: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence of probability rows (..., V) -> (...), float32, clamped at float32 eps."""
    eps = torch.finfo(torch.float32).eps
    prev, curr = prev.clamp_min(eps).float(), curr.clamp_min(eps).float()
    mid = 0.5 * (prev + curr)
    return 0.5 * ((prev * (prev.log() - mid.log())).sum(-1) + (curr * (curr.log() - mid.log())).sum(-1))


def commit_rule(conf: torch.Tensor, masked: torch.Tensor, tau: float) -> torch.Tensor:
    """conf/masked (B, K) -> commit (B, K): conf > tau capped at max_accept, else the single most confident."""
    above = masked & (conf > tau)
    passed = above.sum(-1)
    cap = (masked.sum(-1) * 0.7).long().clamp(min=5, max=20)
    ranked = top_count(conf, masked, torch.where(passed > cap, cap, torch.ones_like(cap)))
    return torch.where(((passed > cap) | (passed == 0))[:, None], ranked, above)


class _History:
    """P for canvas columns [lo, lo + width) per row (B, width, V), None before the first forward, and
    whether each row's P may feed its inputs (``ready`` (B,), reset at block starts)."""

    def __init__(self, batch: int, device):
        self.probs, self.lo, self.ready = None, 0, torch.zeros(batch, dtype=torch.bool, device=device)

    def block(self, lo: int, k: int) -> torch.Tensor:
        """P (B, K, V) for the block at column ``lo`` (the previous block's forward covered it)."""
        return self.probs[:, lo - self.lo:lo - self.lo + k]

    def update(self, probs, lo, still_masked, working, opts: RemixOptions):
        """probs (B, W, V) of this step's window at column ``lo``; still_masked (B, K); working (B,)."""
        if self.probs is None:  # the very first step: store only
            self.probs, self.lo = probs, lo
            return
        k = still_masked.shape[1]
        prev = self.block(lo, k)
        reject = still_masked & (js_divergence(prev, probs[:, :k]) > opts.remix_js_threshold)
        if not opts.remix_official_quirk:
            reject &= prev.sum(-1) > 0
        probs = probs.clone()
        probs[:, :k][reject] = 0.0
        if self.lo == lo:  # a row whose block is full ran no forward of its own: it keeps its P
            probs = torch.where(working[:, None, None], probs, self.probs)
        self.probs, self.lo = probs, lo
        self.ready |= working


NFE = "one per forward of the canvas (the reference's returned steps); a block ends when full"


@decoder("mdm:remix", reads=frozenset({"gen_length", "block_length", "remasking", "seed", "stop_at_eos"}),
         options=RemixOptions, nfe=NFE)
def decode_remix(model, canvas, cfg, opts: RemixOptions, gens, rule=None) -> DecodeResult:
    """ReMix over ``canvas``: tokens (B, G), each block decoded until full; see the module docstring."""
    x = canvas.tokens.clone()
    batch, gen, k = x.shape[0], cfg.gen_length, cfg.block_length
    weight = model.net.embed.weight
    key_mask = canvas.valid[:, None, None, :]
    end = canvas.gen_start + gen
    history = _History(batch, x.device)
    commit_step = torch.full((batch, gen), -1, dtype=torch.long, device=x.device)
    nfe = torch.zeros(batch, dtype=torch.long, device=x.device)
    for b in range(gen // k):
        lo = canvas.gen_start + b * k
        window = (lo, min(lo + 2 * k, end))  # this block and the next: the next block's P comes from here
        masked = x[:, lo:lo + k] == model.mask_id
        history.ready.zero_()
        while masked.any():
            working = masked.any(-1)
            embeds = weight[x]
            mix = masked & history.ready[:, None]
            if mix.any():
                plain = embeds[:, lo:lo + k]
                soft = soft_embedding(history.block(lo, k), weight, model.mask_id)
                mixed = (1 - opts.remix_beta) * plain + opts.remix_beta * soft
                embeds[:, lo:lo + k] = torch.where(mix[..., None], mixed, plain)
            logits = model.net(None, canvas.positions, key_mask, logits_range=window, inputs_embeds=embeds)
            probs = logits.to(weight.dtype).softmax(-1)
            x0 = logits[:, :k].argmax(-1)
            conf = probs[:, :k].gather(-1, x0[..., None])[..., 0]
            commit = commit_rule(conf, masked, opts.remix_threshold)
            x[:, lo:lo + k] = torch.where(commit, x0, x[:, lo:lo + k])
            commit_step[:, b * k:(b + 1) * k].masked_fill_(commit, 0)
            commit_step[:, b * k:(b + 1) * k] += commit.long() * nfe[:, None]
            nfe += working.long()
            masked = x[:, lo:lo + k] == model.mask_id
            history.update(probs, lo, masked, working, opts)
    block_ids = (torch.arange(gen, device=x.device) // k).expand(batch, -1)
    return DecodeResult(x[:, canvas.gen_slice], commit_step, block_ids.clone(), nfe)
