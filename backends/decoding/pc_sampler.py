"""PC-Sampler (position-aware calibration of confidence) as a commit rule of the masked-diffusion block loop.

After Huang et al., "PC-Sampler: Position-Aware Calibration of Decoding Bias in Masked Diffusion Models";
reference implementation NEUIR/PC-Sampler, src/generate.py, ``pc_sampler_function`` and
``generate_with_pc_sampler`` (commit 8b106b0). For the proposal x0 at block position i (0 = the block's
first column) with probability p(x0) under the plain softmax, the score is

    score_i = exp(-lambda * i) * min(-p(x0) * log(f(x0) + 1e-9), alpha)

where f is the background frequency of the token (:mod:`.pc_background`: by default the table of a declared
corpus without evaluation data for the model's tokenizer, shipped or built once at plan time; ``none``: every
token 1/V, which leaves plain low confidence reweighted by position; or a table file, the authors' included).
The per-step quota, proposals (argmax at T = 0, Gumbel-max above) and options of :func:`.llada.low_confidence`
are unchanged; only the ranking differs. Scores are float64 (the authors compute in the logits' dtype; on
float32 logits the parity fixture's tokens are identical).
"""

from __future__ import annotations

from typing import ClassVar

import torch
from pydantic import Field

from .common import COMMON, early_eos_rejection, top_count
from .llada import LladaOptions, _demote_eos, _proposals
from .mdm import NFE, decode_masked_diffusion
from .pc_background import bind, frequencies
from .spec import decoder
from .stats import prob_of


class PcSamplerOptions(LladaOptions):
    """PC-Sampler: position decay ``pc_lambda`` and clamp ``pc_alpha`` (the authors' defaults 0.25 and 10), the
    background table ``pc_background`` (``declared``: the declared corpus's table for the model's tokenizer,
    shipped or built into the cache directory; ``none``; or a table file) and ``pc_background_sha256``, the
    sha256 of the file used: bound by the plan (recorded, keys the generation cache), or set by hand to pin
    the table."""

    bound: ClassVar[frozenset[str]] = frozenset({"pc_background_sha256"})
    pc_lambda: float = 0.25
    pc_alpha: float = 10.0
    pc_background: str = Field("declared", min_length=1)
    pc_background_sha256: str | None = Field(None, pattern="^[0-9a-f]{64}$")


def scores(p: torch.Tensor, x0: torch.Tensor, freq: torch.Tensor, lam: float, alpha: float) -> torch.Tensor:
    """PC-Sampler scores: p, x0 (B, K) with block positions 0..K-1, freq (V,) -> (B, K) float64."""
    calibrated = (-p * torch.log(freq.to(p.device)[x0] + 1e-9)).clamp(max=alpha)
    position = torch.arange(p.shape[-1], device=p.device, dtype=torch.float64)
    return torch.exp(-lam * position) * calibrated


@decoder("mdm:pc_sampler", loop=decode_masked_diffusion, reads=COMMON | {"cfg_scale"}, options=PcSamplerOptions,
         nfe=NFE, supports_cfg=True, cacheable=True, bind=bind)
def pc_sampler(logits, masked, quota, step, steps, gens, cfg, opts: PcSamplerOptions, model):
    """logits (B, K, V) of the active block -> (commit (B, K), x0 (B, K)); the quota as low confidence."""
    logits, x0, p = _proposals(logits, gens, cfg, opts, model)
    if cfg.temperature != 0:
        p = prob_of(logits, x0)
    freq = frequencies(opts.pc_background, opts.pc_background_sha256, model.tokenizer, logits.shape[-1])
    conf = scores(p, x0, freq, opts.pc_lambda, opts.pc_alpha)
    conf = early_eos_rejection(conf, x0, step, steps, cfg, opts.eos_gamma, opts.step_schedule, model)
    conf = _demote_eos(conf, x0, opts, model)
    return top_count(conf, masked, quota), x0
