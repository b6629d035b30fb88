"""PC-Sampler (position-aware calibration of confidence) as a commit rule of the masked-diffusion block loop.

After Huang et al., "PC-Sampler: Position-Aware Calibration of Decoding Bias in Masked Diffusion Models";
reference implementation NEUIR/PC-Sampler, src/generate.py, ``pc_sampler_function`` and
``generate_with_pc_sampler`` (commit 8b106b0). For the proposal x0 at block position i (0 = the block's
first column) with probability p(x0) under the plain softmax, the score is

    score_i = exp(-lambda * i) * min(-p(x0) * log(f(x0) + 1e-9), alpha)

where f is the background frequency of the token (``pc_background``: a JSON file in the authors' format,
``{"num_token": N, "p_baseline_dict": {token id: count}}``, unseen tokens 1/N; without one every token has
frequency 1/V, which leaves the order of plain low confidence reweighted by position). The per-step quota,
proposals (argmax at T = 0, Gumbel-max above) and options of :func:`.llada.low_confidence` are unchanged; only
the ranking differs. Scores are float64 (the authors compute in the logits' dtype; on float32 logits the
parity fixture's tokens are identical).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import torch

from dare.harness.errors import ConfigError

from .common import COMMON, early_eos_rejection, top_count
from .llada import LladaOptions, _demote_eos, _proposals
from .mdm import NFE, decode_masked_diffusion
from .spec import decoder
from .stats import prob_of


class PcSamplerOptions(LladaOptions):
    """PC-Sampler: position decay ``pc_lambda``, clamp ``pc_alpha``, background counts file ``pc_background``
    (the authors' defaults: 0.25 and 10)."""

    pc_lambda: float = 0.25
    pc_alpha: float = 10.0
    pc_background: str | None = None


@lru_cache(maxsize=4)
def background(path: str | None, vocab: int) -> torch.Tensor:
    """Background token frequencies (V,) float64 from ``path`` (the authors' JSON), or 1/V without one."""
    if path is None:
        return torch.full((vocab,), 1.0 / vocab, dtype=torch.float64)
    try:
        data = json.loads(Path(path).read_text())
        total, counts = float(data["num_token"]), data["p_baseline_dict"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"pc_background={path!r} is not a readable background file ({exc}); give a JSON "
                          '{"num_token": N, "p_baseline_dict": {"<token id>": count}}') from None
    freq = torch.full((vocab,), 1.0 / total, dtype=torch.float64)
    pairs = [(int(k), float(v)) for k, v in counts.items() if int(k) < vocab]  # ids past the embedding never occur
    if pairs:
        ids, values = zip(*pairs)
        freq[torch.tensor(ids)] = torch.tensor(values, dtype=torch.float64) / total
    return freq


def scores(p: torch.Tensor, x0: torch.Tensor, freq: torch.Tensor, lam: float, alpha: float) -> torch.Tensor:
    """PC-Sampler scores: p, x0 (B, K) with block positions 0..K-1, freq (V,) -> (B, K) float64."""
    calibrated = (-p * torch.log(freq.to(p.device)[x0] + 1e-9)).clamp(max=alpha)
    position = torch.arange(p.shape[-1], device=p.device, dtype=torch.float64)
    return torch.exp(-lam * position) * calibrated


@decoder("mdm:pc_sampler", loop=decode_masked_diffusion, reads=COMMON | {"cfg_scale"}, options=PcSamplerOptions,
         nfe=NFE, supports_cfg=True, cacheable=True)
def pc_sampler(logits, masked, quota, step, steps, gens, cfg, opts: PcSamplerOptions, model):
    """logits (B, K, V) of the active block -> (commit (B, K), x0 (B, K)); the quota as low confidence."""
    logits, x0, p = _proposals(logits, gens, cfg, opts, model)
    if cfg.temperature != 0:
        p = prob_of(logits, x0)
    freq = background(opts.pc_background, logits.shape[-1])
    conf = scores(p, x0, freq, opts.pc_lambda, opts.pc_alpha)
    conf = early_eos_rejection(conf, x0, step, steps, cfg, opts.eos_gamma, opts.step_schedule, model)
    conf = _demote_eos(conf, x0, opts, model)
    return top_count(conf, masked, quota), x0
