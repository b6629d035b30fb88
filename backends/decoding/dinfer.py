"""dInfer's parallel decoders and block loop: threshold, credit-boosted threshold and hierarchy.

After Ma et al., "dInfer: An Efficient Inference Framework for Diffusion Language Models" (arXiv 2510.08666); reference
implementation inclusionAI/dInfer@fce4e32 (python/dinfer/decoding/parallel_strategy.py for the rules,
generate_uniform.py ``BlockWiseDiffusionLLM`` / ``BlockRunner.decode`` / ``BaseDiffusionIteration`` for the
loop, utils.py ``BlockIterator``). The rules live in :mod:`.dinfer_rules`; tau is ``threshold``, else
``dinfer_threshold`` (0.9, their benchmarks' default).

- ``dinfer_threshold``: commit every masked position (proposal not the mask token) with fp32 confidence
  >= min(tau, top - 1e-5), so the top-1 always (``dinfer_float64``: float64 confidence, their ``use_float64``).
- ``dinfer_credit``: the same on fused logits l + alpha log(1 + C); per block a credit matrix C (K, V)
  decays by beta per call and gains (max p)^gamma at each masked position's argmax (alpha 0.7, gamma 0.2,
  beta 0.8 as theirs).
- ``dinfer_hierarchy``: per run of adjacent masks its top confidence when > ``dinfer_low_threshold`` (0.4,
  their class default), every confidence > tau, and the block's top-1.

The loop, per row (their batch-1 loop: rows never wait for each other here). With ``dinfer_align_first_block``
(their ``start_block_align``, used by all their benchmarks) blocks sit at multiples of K from the row's first
prompt token: the first block starts at floor(P / K) K, inside the prompt, and only its masked tail is decoded;
the last block ends at the canvas end. Each block runs rounds of unroll_k = clamp(masks // ``dinfer_expected_tpf``,
1, ``dinfer_max_unroll``) forwards of the whole canvas (8 and 4 as theirs) until it has no mask. After a block
that holds the EOS token every later position becomes EOS and the row stops (their early stop).

NFE. Their count (``num_forwards``) includes the forwards a round still runs after its block filled; those
commit nothing, so here they are not run: ``nfe`` counts the forwards run, ``nfe_official`` adds the skipped ones.

``dinfer_official_quirk`` (default True: follow the authors): the hierarchy confidence is computed in the logits'
dtype (bfloat16 on their GPUs, where ties commit several positions of a run; False: float64), and the early
stop also sees EOS tokens of the prompt tail inside the first aligned block (False: generated positions only).

Differences from the reference, where it cannot match: their credit state outlives ``generate`` when an early
stop leaves masks (a later prompt resumes it); here it lives for one decode. At temperature > 0 the noise comes
from each row's generator (their ``rand_like`` draws from the global one). A forward whose commits hold no token
but the mask makes their loop repeat forever; here that row commits its best non-mask proposal instead. Their
batched benchmark right-pads prompts with the mask token; here rows are left-padded and decode as alone.
Dream (shifted logits) runs as their ``use_shift`` loop (``ShiftDiffusionIteration``).

``dinfer_cache=vicinity`` (LLaDA; :mod:`.dinfer_vicinity`) runs their ``VicinityCacheIteration`` in this loop:
warm-up full forwards, a full refresh storing K/V on a new block, then forwards of a window around the block over
the stored K/V; tokens and ``nfe_official`` equal ``VicinityCacheDiffusionLLM``'s. Not implemented: iteration
smoothing, which needs ``h2e``, absent from their dense LLaDA.
Shapes: B rows, R rows in a forward, L canvas length, K block length, V vocabulary, G gen_length.
"""

from __future__ import annotations

import torch
from pydantic import Field

from .common import (
    COMMON,
    THRESHOLD_DINFER,
    THRESHOLD_HIERARCHY,
    Canvas,
    DecodeResult,
    LoopOptions,
    sample,
    top_count,
)
from .dinfer_rules import CreditMemory, hierarchy_commit, threshold_commit
from .dinfer_vicinity import NoVicinityOptions, VicinityOptions
from .mdm import CPU_TOKENS_PER_FORWARD
from .spec import decoder
from .stats import greedy_stats


class DinferOptions(LoopOptions):
    """dInfer's loop: ``dinfer_threshold`` (tau when ``threshold`` is unset), ``dinfer_align_first_block``,
    ``dinfer_expected_tpf`` and ``dinfer_max_unroll`` (the unrolled round), ``dinfer_official_quirk``."""

    dinfer_threshold: float = Field(0.9, gt=0, le=1)
    dinfer_align_first_block: bool = True
    dinfer_expected_tpf: int = Field(8, ge=1)
    dinfer_max_unroll: int = Field(4, ge=1)
    dinfer_official_quirk: bool = True

    def forwards(self) -> type | None:
        """The iteration's forwards other than one forward of the whole canvas (None: that one)."""
        return None


class DinferThresholdOptions(DinferOptions):
    """Adds ``dinfer_float64``: float64 confidences (their ``use_float64``; default float32)."""

    dinfer_float64: bool = False


class DinferCreditOptions(DinferThresholdOptions):
    """Adds the credit matrix's weight ``dinfer_credit_alpha``, boost exponent and per-call decay."""

    dinfer_credit_alpha: float = Field(0.7, ge=0)
    dinfer_boost_gamma: float = Field(0.2, gt=0)
    dinfer_decay_beta: float = Field(0.8, ge=0, le=1)


class DinferHierarchyOptions(DinferOptions):
    """Adds ``dinfer_low_threshold``, the floor of a run's maximum (None: no floor)."""

    dinfer_low_threshold: float | None = Field(0.4, ge=0, le=1)


class RowBlocks:
    """Each row's blocks over its generation offsets 0..G-1: ``lead`` (B,) prompt tokens inside its first
    block, ``first`` (B,) the generated positions in it, ``count`` (B,) its number of blocks."""

    def __init__(self, prompt_len: torch.Tensor, gen: int, k: int, align: bool):
        self.gen, self.k = gen, k
        self.lead = prompt_len % k if align else torch.zeros_like(prompt_len)
        self.first = k - self.lead
        self.count = 1 + (gen - self.first).clamp(min=0).add(k - 1).div(k, rounding_mode="floor")

    def span(self, rows: torch.Tensor, block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Generation offsets [lo, hi) (R,) of block ``block`` (R,) of ``rows``."""
        first = self.first[rows]
        lo = torch.where(block == 0, 0, first + (block - 1) * self.k)
        return lo, (first + block * self.k).clamp(max=self.gen)

    def ids(self) -> torch.Tensor:
        """Block index of every generated position (B, G)."""
        offset = torch.arange(self.gen, device=self.first.device)[None]
        later = (offset - self.first[:, None]).div(self.k, rounding_mode="floor") + 1
        return torch.where(offset < self.first[:, None], 0, later)


def _window_logits(model, canvas: Canvas, x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Logits (R, K, V) predicting canvas columns ``cols`` (R, K) of ``rows`` from a forward of the whole canvas
    (Dream: read one column earlier); rows in groups of about CPU_TOKENS_PER_FORWARD canvas tokens on a CPU."""
    shift = 1 if model.arch.shift_logits else 0
    group = max(1, CPU_TOKENS_PER_FORWARD // x.shape[1]) if x.device.type == "cpu" else len(rows)
    out = []
    for g in range(0, len(rows), group):
        part = rows[g:g + group]
        hidden = model.net.hidden_states(x[part], canvas.positions[part], canvas.valid[part][:, None, None, :])
        index = (cols[g:g + group] - shift)[..., None].expand(-1, -1, hidden.shape[-1])
        out.append(model.net.lm_head(hidden.gather(1, index)))
    return torch.cat(out)


class CanvasForwards:
    """dInfer's uncached iteration (``BaseDiffusionIteration``): one forward of the whole canvas per pass, each
    pass an iteration; a round's iterations after the block filled are one forward each."""

    def __init__(self, model, canvas: Canvas, opts: DinferOptions):
        self.model, self.canvas = model, canvas
        self.ended: torch.Tensor | None = None

    def __call__(self, x, rows, blocks, cols, span) -> torch.Tensor:
        self.ended = torch.ones_like(rows, dtype=torch.bool)
        return _window_logits(self.model, self.canvas, x, rows, cols)

    def skip(self, rows, blocks, iterations) -> torch.Tensor:
        return iterations


def _unstick(commit, x0, logits, masked, mask_id):
    """Rows that would commit no token but the mask (their loop would repeat the same forward forever) commit
    their most probable non-mask proposal instead."""
    stuck = masked.any(-1) & ~commit.any(-1)
    if not stuck.any():
        return commit, x0
    banned = logits[stuck].clone()
    banned[..., mask_id] = float("-inf")
    stats = greedy_stats(banned)
    x0, commit = x0.clone(), commit.clone()
    x0[stuck] = stats["x0"]
    commit[stuck] = top_count(stats["p"], masked[stuck], torch.ones_like(stats["p"][:, 0], dtype=torch.long))
    return commit, x0


def _early_stop(x: torch.Tensor, rows: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, end: int, eos: int):
    """Rows (R,) whose finished block, canvas columns [lo, hi) (R,), holds EOS: every column from hi to ``end``
    becomes EOS in ``x`` (B, L). Returns which rows stopped (R,)."""
    columns = torch.arange(x.shape[1], device=x.device)
    span = (columns >= lo[:, None]) & (columns < hi[:, None])
    stop = ((x[rows] == eos) & span).any(-1)
    after = (columns >= hi[:, None]) & (columns < end) & stop[:, None]
    x[rows] = x[rows].masked_fill(after, eos)
    return stop


def decode_dinfer(model, canvas: Canvas, cfg, opts: DinferOptions, gens: list[torch.Generator], rule) -> DecodeResult:
    """Run dInfer's block loop with ``rule(logits (R,K,V), masked (R,K), rows (R,), blocks (R,), memory, gens, cfg,
    opts, model) -> (commit (R,K), x0 (R,K))`` on the rows that still decode, each in its own block; one pass (a
    forward and its commit round) per row and turn, an iteration being one pass or, for a vicinity refresh, two."""
    x = canvas.tokens.clone()
    batch, gen, k, start, device = x.shape[0], cfg.gen_length, cfg.block_length, canvas.gen_start, x.device
    blocks = RowBlocks(canvas.prompt_len, gen, k, opts.dinfer_align_first_block)
    forwards = (opts.forwards() or CanvasForwards)(model, canvas, opts)
    block = torch.zeros(batch, dtype=torch.long, device=device)
    left = torch.zeros_like(block)  # iterations left in each row's unrolled round
    nfe, skipped = torch.zeros_like(block), torch.zeros_like(block)
    live = torch.ones(batch, dtype=torch.bool, device=device)
    commit_step = torch.full((batch, gen), -1, dtype=torch.long, device=device)
    offsets = torch.arange(k, device=device)
    memory = CreditMemory(batch)
    while live.any():
        rows = live.nonzero()[:, 0]
        lo, hi = blocks.span(rows, block[rows])
        inside = lo[:, None] + offsets < hi[:, None]
        cols = (start + lo[:, None] + offsets).clamp(max=x.shape[1] - 1)
        masked = (x[rows[:, None], cols] == model.mask_id) & inside
        fresh = left[rows] == 0
        left[rows] = torch.where(fresh, (masked.sum(-1) // opts.dinfer_expected_tpf).clamp(1, opts.dinfer_max_unroll),
                                 left[rows])
        lead = blocks.lead[rows] * (block[rows] == 0)  # the aligned first block starts inside the prompt
        logits = forwards(x, rows, block[rows], cols, (start + lo - lead, start + hi))
        commit, x0 = rule(logits, masked, rows, block[rows], memory, [gens[r] for r in rows.tolist()], cfg, opts,
                          model)
        commit, x0 = _unstick(commit & masked & (x0 != model.mask_id), x0, logits, masked, model.mask_id)
        r, c = commit.nonzero(as_tuple=True)
        x[rows[r], cols[r, c]] = x0[r, c]
        commit_step[rows[r], cols[r, c] - start] = nfe[rows[r]]
        nfe[rows] += 1
        left[rows] -= forwards.ended.long()
        full = ~((x[rows[:, None], cols] == model.mask_id) & inside).any(-1)
        done = rows[full]
        skipped[done] += forwards.skip(done, block[done], left[done])  # their round still runs these; no commits
        left[done] = 0
        lead = lead[full] if opts.dinfer_official_quirk else 0  # the prompt tail too
        stop = _early_stop(x, done, start + lo[full] - lead, start + hi[full], start + gen, model.eos_id)
        block[done] += 1
        live[done] = ~stop & (block[done] < blocks.count[done])
    return DecodeResult(x[:, canvas.gen_slice], commit_step, blocks.ids(), nfe, nfe + skipped)


def _proposals(logits, gens, cfg):
    """x0 (R, K): the argmax at temperature 0, else a Gumbel-max sample from each row's generator."""
    return logits.argmax(-1) if cfg.temperature == 0 else sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)[0]


def _tau(cfg, opts: DinferOptions) -> float:
    return opts.dinfer_threshold if cfg.threshold is None else cfg.threshold


READS = COMMON | {"threshold"}
NFE = ("one per forward of the canvas (dinfer_cache=vicinity: or of the block's window); a block ends when full. "
       "nfe_official: dInfer's count, which adds the forwards an unrolled round runs after its block filled")



def dinfer_threshold(logits, masked, rows, keys, memory, gens, cfg, opts: DinferThresholdOptions, model):
    """The threshold rule on a block's logits (R, K, V) -> (commit (R, K), x0 (R, K))."""
    x0 = _proposals(logits, gens, cfg)
    return threshold_commit(logits, masked, x0, _tau(cfg, opts), model.mask_id, opts.dinfer_float64), x0


def dinfer_credit(logits, masked, rows, keys, memory: CreditMemory, gens, cfg, opts: DinferCreditOptions, model):
    """The threshold rule on credit-fused logits (proposals and confidences both from the fused logits)."""
    fused = memory.fuse(logits, masked, rows, keys, opts.dinfer_credit_alpha, opts.dinfer_boost_gamma,
                        opts.dinfer_decay_beta)
    return dinfer_threshold(fused, masked, rows, keys, memory, gens, cfg, opts, model)


def dinfer_hierarchy(logits, masked, rows, keys, memory, gens, cfg, opts: DinferHierarchyOptions, model):
    """The hierarchy rule on a block's logits (R, K, V) -> (commit (R, K), x0 (R, K))."""
    x0 = _proposals(logits, gens, cfg)
    commit = hierarchy_commit(logits, masked, x0, _tau(cfg, opts), opts.dinfer_low_threshold,
                              opts.dinfer_official_quirk)
    return commit, x0


class LladaThresholdOptions(VicinityOptions, DinferThresholdOptions):
    """The threshold rule's options and the vicinity cache's."""


class LladaCreditOptions(VicinityOptions, DinferCreditOptions):
    """The credit rule's options and the vicinity cache's."""


class LladaHierarchyOptions(VicinityOptions, DinferHierarchyOptions):
    """The hierarchy rule's options and the vicinity cache's."""


class DreamThresholdOptions(NoVicinityOptions, DinferThresholdOptions):
    """The threshold rule's options; no vicinity cache."""


class DreamCreditOptions(NoVicinityOptions, DinferCreditOptions):
    """The credit rule's options; no vicinity cache."""


class DreamHierarchyOptions(NoVicinityOptions, DinferHierarchyOptions):
    """The hierarchy rule's options; no vicinity cache."""


for _rule, _llada, _dream, _text in (
        (dinfer_threshold, LladaThresholdOptions, DreamThresholdOptions, THRESHOLD_DINFER),
        (dinfer_credit, LladaCreditOptions, DreamCreditOptions, THRESHOLD_DINFER),
        (dinfer_hierarchy, LladaHierarchyOptions, DreamHierarchyOptions, THRESHOLD_HIERARCHY)):
    for _family, _family_options in (("mdm", _llada), ("dream", _dream)):
        decoder(f"{_family}:{_rule.__name__}", loop=decode_dinfer, reads=READS, options=_family_options,
                rules={"threshold": _text}, nfe=NFE)(_rule)
