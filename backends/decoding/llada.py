"""LLaDA remasking policies (low-confidence and random) for the masked-diffusion block loop.

Proposals are Gumbel-max samples in float64 (argmax at T = 0); confidence is the probability of the
proposal under the un-tempered softmax (``low_confidence``) or a uniform random number (``random``).
Commits follow the per-step quota, or with ``threshold`` / ``factor`` the Fast-dLLM parallel rules.
Options in ``DecodingConfig.extra``: ``logits_eos_inf`` (never propose EOS), ``confidence_eos_eot_inf``
(commit EOS / end-of-turn proposals last; the documented intent of the upstream flag), ``eos_gamma`` and
``step_schedule`` (CJ-GRPO's EOS early rejection and ascending step sizes, :mod:`.common`).
"""

from __future__ import annotations

import torch

from .common import early_eos_rejection, factor_rule, option, row_noise, sample, threshold_or_top1, top_count
from .stats import prob_of


def _commit(conf, masked, quota, cfg):
    if cfg.threshold is not None:
        return threshold_or_top1(conf, masked, cfg.threshold)
    if cfg.factor is not None:
        return factor_rule(conf, masked, cfg.factor)
    return top_count(conf, masked, quota)


def _proposals(logits, gens, cfg, model):
    if option(cfg, "logits_eos_inf", False):
        logits = logits.clone()
        logits[..., model.eos_id] = float("-inf")
    x0, _, p_plain = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    return logits, x0, p_plain


def _demote_eos(conf, x0, cfg, model):
    if option(cfg, "confidence_eos_eot_inf", False):
        conf = conf.masked_fill(torch.isin(x0, torch.tensor(model.stop_ids, device=x0.device)), float("-inf"))
    return conf


def low_confidence(logits, masked, quota, step, steps, gens, cfg, model):
    """logits (B, K, V) of the active block -> (commit (B, K), x0 (B, K))."""
    logits, x0, p = _proposals(logits, gens, cfg, model)
    conf = p if cfg.temperature == 0 else prob_of(logits, x0)  # the un-tempered softmax's probability
    conf = _demote_eos(early_eos_rejection(conf, x0, step, steps, cfg, model), x0, cfg, model)
    return _commit(conf, masked, quota, cfg), x0


def random_remasking(logits, masked, quota, step, steps, gens, cfg, model):
    """Like :func:`low_confidence` but positions are chosen uniformly at random (per-row generators)."""
    logits, x0, _ = _proposals(logits, gens, cfg, model)
    conf = row_noise(gens, tuple(masked.shape[1:]), logits.device)
    conf = _demote_eos(conf, x0, cfg, model)
    return _commit(conf, masked, quota, cfg), x0
