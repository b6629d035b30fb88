"""KLASS (KL-adaptive stability sampling) on the masked-diffusion block loop, greedy.

After Kim et al., "KLASS: KL-Adaptive Stability Sampling for Fast Inference in Masked Diffusion Models"
(NeurIPS 2025); reference implementation shkim0116/KLASS, src/model/llada_klass.py,
``stable_confident_decode`` with ``alg="klass"``, ``unmask_strategy="all"`` (commit ad87ecb). Each step,
with p_t the float64 softmax at a position and KL_t = sum_v p_t (log(p_t + 1e-12) - log(p_{t-1} + 1e-12))
against the previous forward (p_0 = 0 before the first one): a masked position of the block is *ready* when
p_t(x0) > ``klass_conf_threshold`` and its last ``klass_history`` KLs are all < ``klass_kl_threshold``
(checked from the block's step ``klass_history - 1`` on). A row with ready positions commits all of them;
otherwise its per-step quota of the most confident, as low confidence does. A block ends when full, so a
stable model spends fewer forwards than ``steps``.

The previous forward's distribution for the next block's columns is needed when that block starts, so
each forward computes logits for the active block and the one after it (the reference computes the whole
canvas). Difference from the reference: when ready commits ran ahead of the quota schedule, a later
quota can exceed the masked count; the reference's top-k then also rewrites positions that are not masked
(already decoded tokens, even prompt tokens); here only masked positions are ever written.
"""

from __future__ import annotations

import torch

from dare.harness.errors import ConfigError

from .common import COMMON, DecoderOptions, steps_per_block, top_count
from .mdm import BlockForward, _forward, decode_masked_diffusion
from .spec import decoder

EPS = 1e-12  # the reference's smoothing inside both logarithms


def kl_to_previous(probs: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """KL(p_t || p_{t-1}) per position, the reference's smoothed form: probs, prev (B, N, V) float64 -> (B, N)."""
    return (probs * ((probs + EPS).log() - (prev + EPS).log())).sum(-1)


class KlassOptions(DecoderOptions):
    """KLASS: commit positions whose confidence exceeds ``klass_conf_threshold`` and whose last
    ``klass_history`` KL divergences stay below ``klass_kl_threshold`` (the authors' defaults)."""

    klass_conf_threshold: float = 0.9
    klass_kl_threshold: float = 0.01
    klass_history: int = 2


class _Klass:
    """Per-decode state: the previous forward's probabilities (B, W, V) for columns [prev_lo, prev_lo + W)
    and this block's KL history (steps so far, each (B, K))."""

    def __init__(self, opts: KlassOptions):
        self.tau, self.kl_tau, self.history = opts.klass_conf_threshold, opts.klass_kl_threshold, opts.klass_history
        self.lo, self.prev, self.prev_lo, self.kls = 0, None, 0, []

    def _previous(self, probs: torch.Tensor, k: int) -> torch.Tensor:
        """p_{t-1} (B, K, V) for the block's columns; zeros where no earlier forward saw them."""
        if self.prev is None or self.lo - self.prev_lo >= self.prev.shape[1]:
            return torch.zeros_like(probs[:, :k])
        start = self.lo - self.prev_lo
        return self.prev[:, start:start + k]

    def policy(self, logits, masked, quota, step, steps, gens, cfg, opts, model):
        """logits (B, W, V) for the block and the next one -> (commit (B, K), x0 (B, K))."""
        k = masked.shape[1]
        if step == 0:
            self.kls = []
        probs = logits.double().softmax(-1)
        block = probs[:, :k]
        x0 = block.argmax(-1)
        conf = block.gather(-1, x0[..., None])[..., 0]
        prev = self._previous(probs, k)
        self.kls.append(kl_to_previous(block, prev))
        if self.prev is not None and self.prev_lo == self.lo:  # a row whose block is full ran no forward of its own
            probs = torch.where(masked.any(-1)[:, None, None], probs, self.prev)
        self.prev, self.prev_lo = probs, self.lo
        stable = torch.zeros_like(masked)
        if step >= self.history - 1:
            stable = (torch.stack(self.kls[-self.history:], -1) < self.kl_tau).all(-1)
        ready = stable & (conf > self.tau) & masked
        fallback = top_count(conf, masked, quota)
        return torch.where(ready.any(-1, keepdim=True), ready, fallback), x0


NFE = "one per forward of the canvas; a block ends when full, so a stable model spends fewer than steps"


@decoder("mdm:klass", reads=COMMON, options=KlassOptions, nfe=NFE)  # its own logits window: no KV cache
def decode_klass(model, canvas, cfg, opts: KlassOptions, gens, rule=None):
    """KLASS through :func:`.mdm.decode_masked_diffusion` with a two-block logits window (its rule is its own)."""
    if cfg.temperature != 0:
        raise ConfigError(f"remasking=klass is greedy here (temperature={cfg.temperature}); use temperature=0")
    history = opts.klass_history
    if not 1 <= history <= steps_per_block(cfg):
        raise ConfigError(f"klass_history={history} must be between 1 and the steps per block "
                          f"({steps_per_block(cfg)}); lower it or raise steps")
    state = _Klass(opts)
    end = canvas.gen_start + cfg.gen_length

    def block_forward(lo):
        state.lo = lo
        hi = min(lo + 2 * cfg.block_length, end)
        return BlockForward(lambda x, first: _forward(model, canvas, x, cfg, lo, hi))

    return decode_masked_diffusion(model, canvas, cfg, opts, gens, state.policy, block_forward)
