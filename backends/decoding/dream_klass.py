"""KLASS on Dream: commit what is confident and has stopped moving, tracked over the whole generated canvas.

After Kim et al., "KLASS: KL-Adaptive Stability Sampling for Fast Inference in Masked Diffusion Models"
(NeurIPS 2025); reference implementation shkim0116/KLASS@ad87ecb, src/model/dream_klass.py,
``DreamGenerationMixin._sample`` with ``alg="klass"`` (the LLaDA variant is :mod:`.klass`). Each step, at
every generated position (Dream's shifted logits; p_t the float64 softmax, p_{-1} = 0):

- KL_t = KL(p_t || p_{t-1}) (:func:`.klass.kl_to_previous`) enters a rolling history of the last
  ``klass_history`` values that starts as zeros; a position is *stable* when all of them are
  < ``klass_kl_threshold``. KL_0 is about log(1e12), so no position is stable in the first ``klass_history``
  steps;
- x0 = argmax p_t (untempered, unfiltered), conf = p_t(x0); *ready* = stable, conf >= ``klass_conf_threshold``
  and masked;
- a row with ready positions commits them by ``klass_unmask_strategy``: ``all`` (the default), ``max_conf``
  (the most confident), ``min_kl`` (the smallest KL_t) or ``random`` (one of them, uniformly);
- a row without: the *fallback* draws Dream's ``maskgit_plus`` proposals (logits / temperature, then top_p,
  then top_k, the reference's order; the argmax at temperature 0), picks the masked position whose drawn
  token is the most probable, and writes x0 there (the drawn token is discarded): one token per step.

A row ends when no mask is left, so a stable model spends fewer forwards than ``steps``; with fewer
``steps`` than masks the fallback may leave masks, as the reference does. ``block_length = gen_length`` is
the reference's single block; with shorter blocks only the active block's masked positions commit, while
distributions and KL histories are kept for every generated position at every forward, as the reference
keeps them for its whole canvas.

NFE: ``nfe`` the forwards run; ``nfe_official`` the reference's ``used_steps``, the step at which no mask
was left or, when the loop used every step (even if the last one filled the canvas), its initial value,
the literal 256, whatever ``steps`` is. The record keeps that quirk; ``nfe`` does not.

Differences from the reference, which runs batch 1: here rows are independent. The reference's KL history
and p_{t-1} have batch 1, a step where any row lacks a ready position commits nothing in the rows that have
some, and the fallback's argmax runs over all rows' masked positions flattened. Randomness (the fallback's
draws at temperature > 0, the ``random`` strategy) comes from each row's generator in the reference's
order, so a row seeded s draws what the reference draws after ``torch.manual_seed(s)``. x0 is the argmax of
the float64 softmax (the reference's: of the model-dtype softmax; they differ only on a tie in that dtype).

Memory: two (B, G, V) float64 tensors, this step's distributions and the previous ones (the reference keeps
one (1, prompt + G, V)). Shapes: B rows, G gen_length, K block length, V vocabulary, H ``klass_history``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch

from dare.harness.errors import ConfigError

from .common import COMMON, filter_logits
from .klass import KlassOptions, kl_to_previous
from .mdm import BlockForward, _forward, decode_masked_diffusion
from .spec import decoder

UNFINISHED_USED_STEPS = 256  # the reference's initial ``used_steps``, reported when the loop ran every step


class DreamKlassOptions(KlassOptions):
    """KLASS on Dream: :class:`.klass.KlassOptions` (the reference config's defaults: confidence 0.9, KL 0.01,
    history 2) and ``klass_unmask_strategy``, which of the ready positions a step commits (default ``all``)."""

    klass_unmask_strategy: Literal["all", "max_conf", "min_kl", "random"] = "all"


def _best(ready: torch.Tensor, score: torch.Tensor) -> torch.Tensor:
    """The ready position (B, K) with the highest score, the first on a tie; none in a row without one."""
    best = score.masked_fill(~ready, float("-inf")).argmax(-1, keepdim=True)
    return torch.zeros_like(ready).scatter_(-1, best, True) & ready


def _one_at_random(ready: torch.Tensor, gens: list[torch.Generator]) -> torch.Tensor:
    """One ready position per row, uniformly from the row's generator (no draw where at most one is ready)."""
    chosen = ready.clone()
    for r in (ready.sum(-1) > 1).nonzero()[:, 0].tolist():
        candidates = ready[r].nonzero()[:, 0]
        pick = int(torch.randint(0, len(candidates), (1,), generator=gens[r]))
        chosen[r] = False
        chosen[r, candidates[pick]] = True
    return chosen


#: klass_unmask_strategy -> (ready (B, K), conf (B, K), kl (B, K), gens) -> commit (B, K)
UNMASK = {
    "all": lambda ready, conf, kl, gens: ready,
    "max_conf": lambda ready, conf, kl, gens: _best(ready, conf),
    "min_kl": lambda ready, conf, kl, gens: _best(ready, -kl),
    "random": lambda ready, conf, kl, gens: _one_at_random(ready, gens),
}


def _fallback(logits: torch.Tensor, masked: torch.Tensor, rows: list[int], cfg, gens) -> torch.Tensor:
    """For each of ``rows``: the masked position (of logits (B, K, V), masked (B, K)) whose maskgit_plus draw
    is the most probable -> commit (B, K), one position per listed row."""
    commit = torch.zeros_like(masked)
    for r in rows:
        columns = masked[r].nonzero()[:, 0]
        scaled = logits[r, columns] / cfg.temperature if cfg.temperature > 0 else logits[r, columns]
        probs = filter_logits(filter_logits(scaled, None, cfg.top_p), cfg.top_k, None).softmax(-1)
        if cfg.temperature > 0:  # a categorical draw per masked position, as torch.distributions draws it
            gen = gens[r]
            drawn = torch.multinomial((probs / probs.sum(-1, keepdim=True)).to(gen.device), 1, True, generator=gen)
            conf = probs.gather(-1, drawn.to(probs.device))[:, 0]
        else:
            conf = probs.max(-1).values
        commit[r, columns[conf.argmax()]] = True
    return commit


class _DreamKlass:
    """Per-decode state: p_{t-1} (B, G, V) float64 and the KL history (B, G, H) of every generated position;
    ``offset`` is the active block's first generated column."""

    def __init__(self, opts: DreamKlassOptions):
        self.tau, self.kl_tau, self.history_length = (opts.klass_conf_threshold, opts.klass_kl_threshold,
                                                      opts.klass_history)
        self.unmask = UNMASK[opts.klass_unmask_strategy]
        self.prev: torch.Tensor | None = None
        self.history: torch.Tensor | None = None
        self.offset = 0

    def policy(self, logits, masked, quota, step, steps, gens, cfg, opts, model):
        """logits (B, G, V) of the whole generated canvas, masked (B, K) of the block -> (commit, x0) (B, K)."""
        probs = logits.double().softmax(-1)
        if self.prev is None:
            self.prev = torch.zeros_like(probs)
            self.history = probs.new_zeros(*probs.shape[:2], self.history_length)
        kl = kl_to_previous(probs, self.prev)
        live = masked.any(-1)  # a row whose block is full ran no forward of its own (its neighbours did)
        self.history[live] = torch.cat([self.history[live, :, 1:], kl[live, :, None]], -1)
        self.prev[live] = probs[live]
        block = slice(self.offset, self.offset + masked.shape[1])
        x0 = probs[:, block].argmax(-1)
        conf = probs[:, block].gather(-1, x0[..., None])[..., 0]
        ready = (self.history[:, block] < self.kl_tau).all(-1) & (conf >= self.tau) & masked
        has_ready = ready.any(-1)
        commit = self.unmask(ready, conf, kl[:, block], gens)
        stuck = (live & ~has_ready).nonzero()[:, 0].tolist()
        return commit | _fallback(logits[:, block], masked, stuck, cfg, gens), x0


NFE = ("one per forward of the canvas; a row ends when no mask is left. nfe_official: the reference's used_steps, "
       "the step at which no mask was left, or 256 when the loop ran every step")


@decoder("dream:klass", reads=COMMON, options=DreamKlassOptions, nfe=NFE)  # its own logits window: no KV cache
def decode_dream_klass(model, canvas, cfg, opts: DreamKlassOptions, gens, rule=None):
    """KLASS through :func:`.mdm.decode_masked_diffusion`, each forward's logits over the whole generated canvas."""
    if not 1 <= opts.klass_history <= cfg.steps:
        raise ConfigError(f"klass_history={opts.klass_history} must be between 1 and steps ({cfg.steps}); "
                          "lower it or raise steps")
    state = _DreamKlass(opts)
    start, end = canvas.gen_start, canvas.gen_start + cfg.gen_length

    def block_forward(lo):
        state.offset = lo - start
        return BlockForward(lambda x, first: _forward(model, canvas, x, cfg, start, end))

    result = decode_masked_diffusion(model, canvas, cfg, opts, gens, state.policy, block_forward)
    finished = (result.tokens != model.mask_id).all(-1) & (result.nfe < cfg.steps)
    return dataclasses.replace(result, nfe_official=torch.where(finished, result.nfe, UNFINISHED_USED_STEPS))
