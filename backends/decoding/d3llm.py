"""d3LLM's entropy multi-block decoding (LLaDA and Dream), no KV cache.

After the decoder of hao-ai-lab/d3LLM (commit e5bfcaccb775ee75759c24ccc9a28218b8372b34):
d3llm/d3llm_LLaDA/d3llm_llada_generate_util.py ``generate_multi_block`` (with ``get_transfer_index_entropy``
and ``handle_early_stop``) and d3llm/d3llm_DREAM/d3llm_dream_generate_util.py
``DreamGenerationMixin._sample_multi_block`` (``alg="entropy_threshold"``). The repository has no LICENSE
file; nothing of it is copied here.

The generation canvas is cut into blocks of K = block_length from the prompt end. A block is *added* (becomes a
candidate region) and later *fully activated*; the prompt counts as a finished block. Each iteration, per row:

1. early stop (``d3llm_early_stop``): with an EOS on the canvas, every position after the first one becomes EOS,
   every block's masks are recounted from the canvas (a count that changed to 0 fully activates its block; the
   LLaDA file recounts only the block holding the EOS and zeroes the later ones, the same counts)
   and the blocks not yet added are added, finished; a canvas without masks ends the row;
2. a block whose predecessor's decoded share (1 - masks / K, counted from the commits) is
   >= ``d3llm_decoded_token_threshold`` is fully activated;
3. a block is added when the last one's decoded share is >= ``d3llm_block_add_threshold`` or it has no masks
   (fully activated at once when that share passes the decoded-token threshold);
4. one forward of the whole canvas, uncached; the candidates are the masked positions up to the end of the last
   block that is fully activated or still has masks;
5. H_i = -sum_v p_v log(p_v + 1e-12) over the float64 softmax. LLaDA commits every candidate with
   H <= ``d3llm_entropy_threshold`` plus the candidate of lowest entropy; Dream every candidate with H < threshold
   (strict, no global guarantee). Both: if the first fully activated block that still has masks committed
   nothing, its candidate of lowest entropy is committed (LLaDA with the argmax token even at T > 0, Dream
   with the sampled one). Tokens are the argmax, or at T > 0 samples of softmax(logits / T) (Gumbel-max from
   the row's generator, top-k / top-p honoured; the authors draw from the global generator).

Defaults are those of the LLaDA function's signature (threshold 0.5, block_add 0.5, decoded 0.5, early stop
off), for both families: Dream's ``generate_multi_block`` passes threshold 0.9 unless told, its scripts 0.4 with
block_add 0.1 and decoded 0.95 (eval_llada.py's defaults too). ``steps`` is read and recorded but bounds nothing,
as in the authors' signature: a row runs until its canvas is full (at most 10,000 iterations, their cap).

Quirk (``d3llm_official_quirk``, default True: the authors' behaviour): the candidates are the positions masked
when the iteration began, before the early-stop fill, so in the iteration that fills, a commit may overwrite
the EOS written after the first EOS (the text, cut at the first EOS, is unaffected; which positions commit
before it can be). False takes the candidates after the fill.

NFE: ``nfe`` counts the forwards a row ran; ``nfe_official`` the authors' count, loop iterations, which is one
more when early stop leaves no mask (that iteration runs no forward). Rows are independent: each keeps its own
blocks, a finished row leaves the batch's forwards, and T > 0 noise is drawn per row for its candidates only.

LoPA's lookahead branches over the same kind of progressive blocks are :mod:`.lopa` (``dream:lopa``).

Shapes: B rows, L canvas length, G gen_length, K block_length, N = G / K blocks, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from pydantic import Field

from .common import COMMON, Canvas, DecodeResult, LoopOptions, sample
from .mdm import _net
from .spec import decoder
from .stats import CHUNK_ELEMENTS

EPS = 1e-12  # the authors' smoothing inside the entropy's logarithm
MAX_ITERATIONS = 10_000  # the authors' cap on a decode's iterations
NFE = ("one per forward of the whole canvas (no cache); nfe_official: the authors' loop iterations, one more "
       "than the forwards when early stop leaves no mask")


class D3llmOptions(LoopOptions):
    """d3LLM multi-block decoding: entropy threshold tau, the two block thresholds, EOS early stop and the
    authors' candidate quirk (see the module docstring)."""

    d3llm_entropy_threshold: float = Field(0.5, ge=0)
    d3llm_block_add_threshold: float = Field(0.5, ge=0, le=1)
    d3llm_decoded_token_threshold: float = Field(0.5, ge=0, le=1)
    d3llm_early_stop: bool = False
    d3llm_official_quirk: bool = True


@dataclass(frozen=True)
class CommitRule:
    """What differs between the families: ``strict`` (H < tau, else H <= tau), ``lowest`` (also commit the
    lowest-entropy candidate), ``greedy_forced`` (a forced commit takes the argmax token)."""

    strict: bool
    lowest: bool
    greedy_forced: bool


LLADA = CommitRule(strict=False, lowest=True, greedy_forced=True)
DREAM = CommitRule(strict=True, lowest=False, greedy_forced=False)


@dataclass
class Blocks:
    """Per-row block states (B, N): ``added``, ``active`` (fully activated; the authors' ``is_complete``) and
    ``count`` (masks left, as the authors track it: less the commits)."""

    added: torch.Tensor
    active: torch.Tensor
    count: torch.Tensor

    @classmethod
    def start(cls, batch: int, n: int, k: int, opts: D3llmOptions, device) -> Blocks:
        added = torch.zeros(batch, n, dtype=torch.bool, device=device)
        added[:, 0] = True
        active = added & (1.0 >= opts.d3llm_decoded_token_threshold)  # the prompt counts as finished
        return cls(added, active, torch.full((batch, n), k, dtype=torch.long, device=device))

    def decoded_share(self, k: int) -> torch.Tensor:
        """Each block's predecessor's decoded share (B, N); the prompt's is 1."""
        share = 1 - self.count.double() / k
        return torch.cat([torch.ones_like(share[:, :1]), share[:, :-1]], 1)


def _entropy(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """logits (M, V) -> argmax (M,) and the authors' smoothed entropy (M,) in float64, in chunks of rows."""
    out = torch.empty(logits.shape[0], dtype=torch.float64, device=logits.device)
    rows = max(1, CHUNK_ELEMENTS // logits.shape[-1])
    for lo in range(0, logits.shape[0], rows):
        p = logits[lo:lo + rows].double().softmax(-1)
        out[lo:lo + rows] = -(p * (p + EPS).log()).sum(-1)
    return logits.argmax(-1), out


def _early_stop(x: torch.Tensor, canvas: Canvas, blocks: Blocks, k: int, model, commit_step, live) -> torch.Tensor:
    """Early stop for the ``live`` (B,) rows with an EOS on their canvas: EOS after the first one, masks recounted
    (a count changed to 0 activates its block), the blocks not added yet added finished. -> has_eos (B,)."""
    gen = x[:, canvas.gen_slice]
    column = torch.arange(gen.shape[1], device=x.device)
    is_eos = gen == model.eos_id
    has_eos = is_eos.any(-1) & live
    first = torch.where(is_eos, column, gen.shape[1]).amin(-1)
    after = (column[None] > first[:, None]) & has_eos[:, None]
    x[:, canvas.gen_slice] = gen.masked_fill(after, model.eos_id)
    commit_step.masked_fill_(after, -1)
    actual = (x[:, canvas.gen_slice] == model.mask_id).view(x.shape[0], -1, k).sum(-1)
    changed = has_eos[:, None] & blocks.added & (actual != blocks.count)
    missing = has_eos[:, None] & ~blocks.added
    blocks.active |= (changed & (actual == 0)) | missing
    blocks.count = torch.where(changed, actual, blocks.count).masked_fill(missing, 0)
    blocks.added |= missing
    return has_eos


def _activate_and_add(x: torch.Tensor, canvas: Canvas, blocks: Blocks, k: int, model, opts: D3llmOptions, live,
                      adding):
    """Fully activate the blocks whose predecessor passed the decoded-token threshold (``live`` rows), then add
    one block to each ``adding`` row whose last block passed the add threshold or has no masks."""
    blocks.active |= live[:, None] & blocks.added & (blocks.decoded_share(k) >= opts.d3llm_decoded_token_threshold)
    rows = torch.arange(x.shape[0], device=x.device)
    last = blocks.added.sum(-1) - 1
    last_count = blocks.count[rows, last]
    last_share = 1 - last_count.double() / k
    add = adding & ~blocks.added.all(-1) & ((last_share >= opts.d3llm_block_add_threshold) | (last_count == 0))
    rows, new = rows[add], last[add] + 1
    masks = (x[:, canvas.gen_slice] == model.mask_id).view(x.shape[0], -1, k).sum(-1)
    blocks.added[rows, new] = True
    blocks.count[rows, new] = masks[rows, new]
    blocks.active[rows, new] = last_share[add] >= opts.d3llm_decoded_token_threshold


def _tokens(logits, candidates, cfg, gens) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """logits (R, W, V), candidates (R, W) -> argmax (R, W), proposals (R, W) and entropy (R, W) (inf off the
    candidates). At T > 0 each row samples its own candidates from its own generator."""
    greedy = torch.zeros(candidates.shape, dtype=torch.long, device=logits.device)
    entropy = torch.full(candidates.shape, float("inf"), dtype=torch.float64, device=logits.device)
    greedy[candidates], entropy[candidates] = _entropy(logits[candidates])
    proposals = greedy.clone()
    if cfg.temperature > 0:
        for r, gen in enumerate(gens):
            picked, _, _ = sample(logits[r, candidates[r]][None], cfg.temperature, [gen], cfg.top_k, cfg.top_p)
            proposals[r, candidates[r]] = picked[0]
    return greedy, proposals, entropy


def _commit(entropy, candidates, first_active, k: int, tau: float, rule: CommitRule) -> tuple[torch.Tensor, ...]:
    """entropy/candidates (R, W), first_active (R,) the first fully activated block with masks (-1: none)
    -> commit (R, W) and forced (R, W): the lowest-entropy candidate of that block where it committed nothing."""
    commit = candidates & (entropy < tau if rule.strict else entropy <= tau)
    if rule.lowest:
        lowest = torch.zeros_like(commit).scatter_(1, entropy.argmin(-1, keepdim=True), True)
        commit |= lowest & candidates
    in_block = (torch.arange(entropy.shape[1], device=entropy.device) // k)[None] == first_active[:, None]
    need = (first_active >= 0) & ~(commit & in_block).any(-1) & (candidates & in_block).any(-1)
    best = entropy.masked_fill(~in_block, float("inf")).argmin(-1, keepdim=True)
    forced = torch.zeros_like(commit).scatter_(1, best, True) & need[:, None]
    return commit | forced, forced


def decode_multi_block(model, canvas: Canvas, cfg, opts: D3llmOptions, gens: list[torch.Generator],
                       rule: CommitRule) -> DecodeResult:
    """d3LLM's loop over the canvas (B, L) with ``rule``; returns the generated tokens (B, G) and the NFE."""
    x = canvas.tokens.clone()
    batch, g, k = x.shape[0], cfg.gen_length, cfg.block_length
    device, lo = x.device, canvas.gen_start
    shift = 1 if model.arch.shift_logits else 0  # Dream: token i is predicted by the output at i - 1
    key_mask = canvas.valid[:, None, None, :]
    blocks = Blocks.start(batch, g // k, k, opts, device)
    commit_step = torch.full((batch, g), -1, dtype=torch.long, device=device)
    nfe = torch.zeros(batch, dtype=torch.long, device=device)
    iterations = torch.zeros_like(nfe)
    live = torch.ones(batch, dtype=torch.bool, device=device)
    while True:
        masked = x[:, canvas.gen_slice] == model.mask_id
        live &= (masked.any(-1) | ~blocks.added.all(-1)) & (iterations <= MAX_ITERATIONS)
        if not live.any():
            break
        iterations += live.long()
        has_eos = torch.zeros_like(live)
        if opts.d3llm_early_stop:
            has_eos = _early_stop(x, canvas, blocks, k, model, commit_step, live)
            live &= (x[:, canvas.gen_slice] == model.mask_id).any(-1)
        _activate_and_add(x, canvas, blocks, k, model, opts, live, live & ~has_eos)
        in_play = blocks.added & (blocks.active | (blocks.count > 0))
        ends = k * (torch.arange(1, g // k + 1, device=device) * in_play).amax(-1)  # columns up to the last one
        live &= ends > 0
        if not live.any():
            continue
        if not opts.d3llm_official_quirk:  # the masks after the early-stop fill
            masked = x[:, canvas.gen_slice] == model.mask_id
        rows = live.nonzero()[:, 0]
        width = int(ends[rows].max())
        candidates = (masked & (torch.arange(g, device=device)[None] < ends[:, None]))[rows, :width]
        logits = _net(model, x[rows], canvas.positions[rows], key_mask[rows], (lo - shift, lo + width - shift))
        greedy, proposals, entropy = _tokens(logits, candidates, cfg, [gens[r] for r in rows.tolist()])
        with_masks = blocks.added & blocks.active & (blocks.count > 0)
        first_active = torch.where(with_masks.any(-1), with_masks.long().argmax(-1), -1)[rows]
        commit, forced = _commit(entropy, candidates, first_active, k, opts.d3llm_entropy_threshold, rule)
        tokens = torch.where(forced, greedy, proposals) if rule.greedy_forced else proposals
        window = x[rows, lo:lo + width]
        x[rows, lo:lo + width] = torch.where(commit, tokens, window)
        steps = commit_step[rows, :width]
        commit_step[rows, :width] = torch.where(commit, nfe[rows, None], steps)
        per_block = torch.zeros(len(rows), g // k, dtype=torch.long, device=device)
        per_block[:, :width // k] = commit.view(len(rows), -1, k).sum(-1)
        count = blocks.count[rows]
        blocks.count[rows] = torch.where(count > 0, count - per_block, count)  # the authors' bookkeeping
        nfe[rows] += 1
    block_ids = (torch.arange(g, device=device) // k).expand(batch, -1)
    return DecodeResult(x[:, canvas.gen_slice], commit_step, block_ids.clone(), nfe, iterations)


@decoder("mdm:d3llm", reads=COMMON, options=D3llmOptions, nfe=NFE)  # its own loop and forwards: no KV cache
def decode_d3llm_llada(model, canvas, cfg, opts: D3llmOptions, gens, rule=None):
    """LLaDA: commits H <= tau plus the lowest-entropy candidate (``generate_multi_block``)."""
    return decode_multi_block(model, canvas, cfg, opts, gens, LLADA)


@decoder("dream:d3llm", reads=COMMON, options=D3llmOptions, nfe=NFE)
def decode_d3llm_dream(model, canvas, cfg, opts: D3llmOptions, gens, rule=None):
    """Dream: commits H < tau, no global guarantee (``_sample_multi_block``)."""
    return decode_multi_block(model, canvas, cfg, opts, gens, DREAM)
