"""LLaDA remasking policies (low-confidence and random) for the masked-diffusion block loop.

Proposals are Gumbel-max samples in float64 (argmax at T = 0); confidence is the probability of the
proposal under the un-tempered softmax (``low_confidence``) or a uniform random number (``random``).
Commits follow the per-step quota, or with ``threshold`` / ``factor`` the Fast-dLLM parallel rules.
Options (``extra``): see :class:`LladaOptions`.
"""

from __future__ import annotations

from typing import Literal

import torch

from dare.harness.records import DecodingConfig

from .common import (
    FACTOR,
    THRESHOLD_TOP1,
    DecoderOptions,
    early_eos_rejection,
    factor_rule,
    row_noise,
    sample,
    step_quotas,
    threshold_or_top1,
    top_count,
)
from .mdm import NFE, PARALLEL, decode_masked_diffusion
from .spec import decoder
from .stats import prob_of

#: what ``threshold`` and ``factor`` set in the masked-diffusion rules that read them: Fast-dLLM's rules
PARALLEL_RULES = {"threshold": THRESHOLD_TOP1, "factor": FACTOR}


class LladaRandomOptions(DecoderOptions):
    """``logits_eos_inf`` (never propose EOS), ``confidence_eos_eot_inf`` (commit EOS / end-of-turn proposals
    last; the documented intent of the upstream flag), ``step_schedule`` (CJ-GRPO's ascending step sizes)."""

    logits_eos_inf: bool = False
    confidence_eos_eot_inf: bool = False
    step_schedule: Literal["uniform", "ascending"] = "uniform"

    def step_quotas(self, cfg: DecodingConfig, masked: torch.Tensor, steps: int) -> torch.Tensor:
        return step_quotas(cfg, self.step_schedule, masked, steps)


class LladaOptions(LladaRandomOptions):
    """Adds ``eos_gamma`` (CJ-GRPO's EOS early rejection, :func:`.common.early_eos_rejection`)."""

    eos_gamma: tuple[float, float] | None = None


def _commit(conf, masked, quota, cfg):
    """The quota's most confident, or Fast-dLLM's threshold / factor rule when one is set."""
    if cfg.threshold is not None:
        return threshold_or_top1(conf, masked, cfg.threshold)
    if cfg.factor is not None:
        return factor_rule(conf, masked, cfg.factor)
    return top_count(conf, masked, quota)


def _proposals(logits, gens, cfg, opts: LladaRandomOptions, model):
    if opts.logits_eos_inf:
        logits = logits.clone()
        logits[..., model.eos_id] = float("-inf")
    x0, _, p_plain = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    return logits, x0, p_plain


def _demote_eos(conf, x0, opts: LladaRandomOptions, model):
    if opts.confidence_eos_eot_inf:
        conf = conf.masked_fill(torch.isin(x0, torch.tensor(model.stop_ids, device=x0.device)), float("-inf"))
    return conf


@decoder("mdm:low_confidence", loop=decode_masked_diffusion, reads=PARALLEL | {"cfg_scale"}, options=LladaOptions,
         rules=PARALLEL_RULES, nfe=NFE, supports_cfg=True, cacheable=True)
def low_confidence(logits, masked, quota, step, steps, gens, cfg, opts: LladaOptions, model):
    """logits (B, K, V) of the active block -> (commit (B, K), x0 (B, K))."""
    logits, x0, p = _proposals(logits, gens, cfg, opts, model)
    conf = p if cfg.temperature == 0 else prob_of(logits, x0)  # the un-tempered softmax's probability
    conf = early_eos_rejection(conf, x0, step, steps, cfg, opts.eos_gamma, opts.step_schedule, model)
    conf = _demote_eos(conf, x0, opts, model)
    return _commit(conf, masked, quota, cfg), x0


@decoder("mdm:random", loop=decode_masked_diffusion, reads=PARALLEL | {"cfg_scale"}, options=LladaRandomOptions,
         rules=PARALLEL_RULES, nfe=NFE, supports_cfg=True, cacheable=True)
def random_remasking(logits, masked, quota, step, steps, gens, cfg, opts: LladaRandomOptions, model):
    """Like :func:`low_confidence` but positions are chosen uniformly at random (per-row generators)."""
    logits, x0, _ = _proposals(logits, gens, cfg, opts, model)
    conf = row_noise(gens, tuple(masked.shape[1:]), logits.device)
    conf = _demote_eos(conf, x0, opts, model)
    return _commit(conf, masked, quota, cfg), x0
