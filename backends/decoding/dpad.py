"""DPad (suffix dropout with a sliding window) as a forward of the masked-diffusion block loop, LLaDA.

After Chen et al., "DPad: Efficient Diffusion Language Models with Suffix Dropout"; reference
implementation Crys-Chen/DPad, llada/generate_dropout.py, ``generate`` with the samplers of
llada/sampler.py (commit 461b36e). At the start of each block only some of the masked suffix columns
after the block are kept in the forward; the rest are dropped from it (neither queries nor keys). Every
kept column keeps its own RoPE position (the authors' adapted RoPE), and the commit rule is plain
low confidence (or its threshold / factor rule) on the active block. With n suffix columns after the
block (distance d = 1..n from its end) and W = ``dpad_window`` (default: gen_length):

- ``dpad_dropout="gaussian"`` (distance-decayed, the authors' DPad): column d is kept when u_d < pdf(d),
  u_d ~ U(0, 1) float32, pdf(d) = scale * exp(-x^2 / 2) / sqrt(2 pi) with x the d-th point of
  linspace(0, sigma, W), pdf = 0 beyond the window (``dpad_sigma``, ``dpad_scale``: the authors' -k, -sc);
- ``dpad_dropout="uniform"``: ``dpad_keep`` columns drawn uniformly among the first min(n, W)
  (all n when ``dpad_keep`` >= n).

Randomness contract: the draws of a row come from its own generator, a CPU ``torch.Generator`` seeded
with the row's request seed (``gens[r].initial_seed()``), one draw per block in block order (n floats
for gaussian, a permutation of min(n, W) for uniform), exactly what the authors' code draws from the
global generator after ``torch.manual_seed(seed)``. So a row's kept columns depend on its seed alone
(not on its neighbours, the device, or sampling noise at T > 0). Differences from the reference: its
batch shares one dropout pattern and its code runs one prompt at a time; here each row draws its own
and rows are padded (masked keys) to the batch's widest kept suffix. The authors build the Gaussian
pdf on CUDA; here it is the same float32 formula on the CPU. The authors' ``early_termination`` (fill
the canvas with EOS after a block containing one) is not implemented: the texts are the same (truncated
at the first EOS), the NFE is the full loop's.

Caches: the Fast-dLLM engine runs the same selection under its prefix and dual caches
(``--engine fastdllm --set cache=prefix|dual``; :func:`.fastdllm.cached_decoder` reads the spec's ``columns``),
as the authors' ``generate_with_prefix_cache`` / ``generate_with_dual_cache`` do: the block-start pass over
the kept columns fills the cache, later steps forward the block and the kept suffix (prefix) or the block
alone (dual, the kept suffix frozen in the cache).

NFE: the forwards run. The authors' loops count the same, cached ones included: they test for a full block
before counting another pass, so unlike NVlabs' Fast-dLLM loops no pass follows a block the block-start
pass filled (``nfe_official`` = ``nfe``). DPad saves forward width, not forward count.

Measured (benchmarks/decode_frontier.py's ``run_one``, one process, shared 2-core CPU, 1 thread; tiny-llada,
Sudoku 0-7, gen 256, block 32, one token per step, default options): accuracy 0/8 for low confidence, 6/8 with
DPad at 1.6x its tokens/s (1.35x in a second run); Fast-dLLM dual cache 0/8 at 7.0x, dual with DPad 7/8
at 7.4x. The tiny model is evaluated (and was fine-tuned) at gen 32; likely DPad helps by hiding most of the
longer masked suffix it never saw in training.
Shapes: B rows, L canvas length, K block length, V vocabulary, S widest kept suffix.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from dare.harness.errors import ConfigError

from . import llada
from .common import Canvas
from .mdm import PARALLEL, BlockForward, _forward, decode_masked_diffusion
from .spec import decoder


class DpadOptions(llada.LladaOptions):
    """DPad: suffix dropout ``dpad_dropout`` (gaussian: distance-decayed with ``dpad_sigma`` and ``dpad_scale``;
    uniform: ``dpad_keep`` columns) inside a window of ``dpad_window`` suffix columns (None: the whole
    suffix); the authors' defaults -k 4, -sc 2."""

    dpad_dropout: Literal["gaussian", "uniform"] = "gaussian"
    dpad_window: int | None = Field(None, ge=1)
    dpad_sigma: float = Field(4.0, gt=0)
    dpad_scale: float = Field(2.0, gt=0)
    dpad_keep: int = Field(0, ge=0)


def gaussian_pdf(window: int, length: int, sigma: float, scale: float) -> torch.Tensor:
    """Keep probability per suffix distance (length,) float32: the authors' float32 formula, 0 past ``window``."""
    x = torch.linspace(0.0, sigma, window)
    pdf = scale * torch.exp(-0.5 * x ** 2) / torch.sqrt(torch.tensor(2 * math.pi))
    return torch.cat([pdf, torch.zeros(length - window)])


def _gaussian(n: int, window: int, pdf: torch.Tensor, keep: int, gen: torch.Generator) -> torch.Tensor:
    """The authors' rejection sampling: n uniform floats, column d kept when u_d < pdf(d)."""
    return torch.nonzero(torch.rand(n, generator=gen) < pdf[:n])[:, 0]


def _uniform(n: int, window: int, pdf: torch.Tensor, keep: int, gen: torch.Generator) -> torch.Tensor:
    """``keep`` columns of the first min(n, window), uniformly (everything when keep >= n, drawing nothing)."""
    if keep >= n:
        return torch.arange(n)
    return torch.sort(torch.randperm(min(n, window), generator=gen)[:keep]).values


#: ``dpad_dropout`` -> sampler ``(n, window, pdf, keep, gen) -> sorted kept offsets (n_kept,)`` of one row, offset 0
#: the column right after the block.
SAMPLERS = {"gaussian": _gaussian, "uniform": _uniform}


class Dropout:
    """Per-decode state: each row's dropout generator and the settings; selects the columns of each block's
    forward and runs a forward (uncached, or a Fast-dLLM cache) over that selection."""

    def __init__(self, model, canvas: Canvas, cfg, opts: DpadOptions, gens: list[torch.Generator]):
        if model.arch.shift_logits:
            raise ConfigError("remasking=dpad is implemented for LLaDA-style (unshifted) models; use another remasking")
        self.model, self.canvas, self.cfg = model, canvas, cfg
        self.keep = opts.dpad_keep
        self.window = opts.dpad_window or cfg.gen_length
        if not 1 <= self.window <= cfg.gen_length:
            raise ConfigError(f"dpad_window={self.window} must be between 1 and gen_length ({cfg.gen_length}); "
                              "lower it or leave it unset (the whole suffix)")
        self.sample = SAMPLERS[opts.dpad_dropout]
        self.pdf = gaussian_pdf(self.window, cfg.gen_length, opts.dpad_sigma, opts.dpad_scale)
        self.gens = [torch.Generator().manual_seed(g.initial_seed()) for g in gens]
        self.end = canvas.gen_start + cfg.gen_length

    def columns(self, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Canvas columns of this block's forward (B, hi + S) and their validity (B, hi + S): all columns before
        ``hi`` (the block's end), then each row's kept suffix columns, padded to the widest row S."""
        n = self.end - hi
        kept = [hi + self.sample(n, self.window, self.pdf, self.keep, g) for g in self.gens]
        width = max(len(k) for k in kept)
        device = self.canvas.tokens.device
        suffix = torch.full((len(kept), width), hi - 1, dtype=torch.long)  # padding: any column, masked as a key
        present = torch.zeros((len(kept), width), dtype=torch.bool)
        for r, k in enumerate(kept):
            suffix[r, :len(k)], present[r, :len(k)] = k, True
        prefix = torch.arange(hi).expand(len(kept), -1)
        index = torch.cat([prefix, suffix], 1).to(device)
        present = torch.cat([torch.ones_like(prefix, dtype=torch.bool), present], 1).to(device)
        valid = self.canvas.valid.gather(1, index) & present
        return index, valid

    def block_forward(self, lo: int, forward_of=None):
        """The forward of the block at column ``lo``: ``(x, first) -> (logits (B, K, V), cost)`` over the kept
        columns. ``forward_of(view, lo)`` builds the inner forward on the selected columns' canvas ``view``
        (default: a full pass); the prefix is kept whole, so the block keeps its column indices there."""
        hi = lo + self.cfg.block_length
        index, valid = self.columns(hi)
        c = self.canvas
        view = Canvas(c.tokens.gather(1, index), valid, c.positions.gather(1, index), c.gen_start, c.gen_length,
                      c.prompt_len)
        if forward_of is None:
            inner = lambda x, first: _forward(self.model, view, x, self.cfg, lo, hi)  # noqa: E731
        else:
            inner = forward_of(view, lo)

        # the authors' cached loops check the block before counting a pass: none after a block the first pass filled
        return BlockForward(lambda x, first: inner(x.gather(1, index), first), official_pass_after_first=False)


def decode_dpad(model, canvas, cfg, opts: DpadOptions, gens, rule):
    """DPad through :func:`.mdm.decode_masked_diffusion`: ``rule`` (low confidence) on a suffix-dropped forward."""
    state = Dropout(model, canvas, cfg, opts, gens)
    return decode_masked_diffusion(model, canvas, cfg, opts, gens, rule, state.block_forward)


NFE = "one per forward of the kept columns (nfe_official the same: the authors' loops count alike)"
# the authors' commit rule (get_transfer_index: quota, or threshold); the Fast-dLLM caches run over its columns
decoder("mdm:dpad", loop=decode_dpad, reads=PARALLEL, options=DpadOptions, rules=llada.PARALLEL_RULES, nfe=NFE,
        cacheable=True, columns=Dropout)(llada.low_confidence)
