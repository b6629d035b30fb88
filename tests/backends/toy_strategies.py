"""A plugin module that adds a commit rule and a KV cache, each in one declaration (docs/ARCHITECTURE.md).

Importing it registers ``mdm:left_bias`` in ``registry.decoders`` and ``stale_prefix`` in ``registry.caches``;
a third-party package names such a module in its ``dare.plugins`` entry point. Nothing else changes: the
resolver, ``--list``, ``--dry-run``, run.json and the cache key read the declarations.
"""

from __future__ import annotations

import torch
from pydantic import Field

from dare.backends.decoding.common import COMMON, DecoderOptions, sample, top_count
from dare.backends.decoding.fastdllm_cache import PrefixCache
from dare.backends.decoding.mdm import NFE, decode_masked_diffusion
from dare.backends.decoding.spec import decoder, kv_cache
from dare.harness.options import Options


class LeftBiasOptions(DecoderOptions):
    """``left_bias``: how much a block position's distance from the block start lowers its score."""

    left_bias: float = Field(0.0, ge=0)


@decoder("mdm:left_bias", loop=decode_masked_diffusion, reads=COMMON | {"cfg_scale"}, options=LeftBiasOptions,
         nfe=NFE, supports_cfg=True, cacheable=True)
def left_bias(logits, masked, quota, step, steps, gens, cfg, opts: LeftBiasOptions, model):
    """Commit the step's quota by p(x0) - left_bias * i, i the block position: logits (B, K, V) -> (B, K) x 2.
    At 0 this is low confidence; a large bias decodes each block left to right."""
    x0, p, _ = sample(logits, cfg.temperature, gens, cfg.top_k, cfg.top_p)
    position = torch.arange(masked.shape[1], device=p.device, dtype=torch.float64)
    return top_count(p.double() - opts.left_bias * position, masked, quota), x0


class StalePrefixOptions(Options):
    """``stale_refresh``: recompute the prefix keys every that many steps of a block (1: every step, exact)."""

    stale_refresh: int = Field(1, ge=1)


class StalePrefixForward:
    """One block's forwards (``(x (B, L), first) -> (logits (B, K, V), cost)``): a full pass fills a prefix
    cache every ``stale_refresh`` steps; the steps between send only the block and the suffix."""

    official_pass_after_first = False  # NFE: the passes this loop runs

    def __init__(self, model, canvas, cfg, opts: StalePrefixOptions, lo: int):
        self.model, self.canvas, self.lo, self.k = model, canvas, lo, cfg.block_length
        self.refresh, self.step, self.cache = opts.stale_refresh, 0, None
        self.key_mask = canvas.valid[:, None, None, :]

    def __call__(self, x: torch.Tensor, first: bool):
        self.step = 0 if first else self.step + 1
        net, lo, hi = self.model.net, self.lo, self.lo + self.k
        if self.step % self.refresh == 0:
            self.cache = PrefixCache(net.args.n_layers, lo, hi)
            return net(x, self.canvas.positions, self.key_mask, self.cache, logits_range=(lo, hi)), 1
        return net(x[:, lo:], self.canvas.positions[:, lo:], self.key_mask, self.cache, logits_range=(0, self.k)), 1


kv_cache("stale_prefix", families=frozenset({"mdm"}), options=StalePrefixOptions,
         unread=frozenset({"cfg_scale"}))(StalePrefixForward)
