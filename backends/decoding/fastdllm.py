"""Fast-dLLM (v1) decoding for LLaDA and Dream: prefix / dual KV cache plus threshold / factor commits.

The loop is the reference semi-autoregressive block loop of :mod:`.mdm` (same per-step quotas, policies,
commit bookkeeping and NFE accounting); only the forward changes with ``DecodingConfig.cache``:

- ``none``: every step is a full forward over the canvas (identical to the reference decoder).
- ``prefix``: each block starts with a full pass that fills a :class:`PrefixCache` with the k/v of every
  column before the block; later steps forward only the block and everything after it (L - s queries).
- ``dual``: the block-start pass caches *all* columns; later steps forward only the block's K columns,
  overwrite their k/v in the cache and attend over the whole canvas (prefix and masked suffix frozen).

The block-start pass is also the block's step 0 (it commits the step-0 quota), as in NVlabs/Fast-dLLM.
Dream predicts column i from the output at i - 1: the cached windows start one column early (prefix
from s - 1, dual window [s - 1, e)), so every shifted logit comes from a freshly computed query. Upstream
Fast-dLLM instead commits the block's first token unconditionally in the block-start pass; here the
policy decides it like every other token, which keeps the cached decoder equal to the reference on
models whose cached keys do not change.

Threshold and factor rules come from the policies (top-1 plus every confidence >= tau; factor rule).

NFE: ``nfe`` counts the forwards this loop runs. The official loops (NVlabs/Fast-dLLM@24cc59e,
llada/generate.py: ``generate_with_prefix_cache`` / ``generate_with_dual_cache``, and the same
``while True`` shape in dream/model/generation_utils_block.py ``_sample``) run at least one cached pass
after the block-start pass, even when that first pass already committed the whole block (a threshold
every confidence clears). This loop skips that pass; ``nfe_official`` adds it back (one pass per such
block, two with classifier-free guidance), so NFE columns can be set beside the paper's. Without a cache
both loops end when the block is full and the two counts agree (``generate`` there).
Shapes: B rows, L canvas length, K block length, V vocabulary, G gen_length.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache, partial

import torch

from dare.harness.errors import ConfigError
from dare.harness.options import Options
from dare.harness.records import DecodingConfig
from dare.harness.registry import caches, did_you_mean

from .common import Canvas, DecodeResult, LoopOptions
from .fastdllm_cache import CACHES
from .mdm import decode_masked_diffusion
from .spec import CacheSpec, DecoderSpec, kv_cache


def cache_strategy(mode: str, family: str | None = None) -> CacheSpec | None:
    """The registered cache for ``cache=mode`` (None for ``none``), checked against ``family``."""
    if mode == "none":
        return None
    if mode not in caches:
        raise ConfigError(f"cache={mode!r} is unknown{did_you_mean(mode, caches.names())}; use none or one of "
                          f"{', '.join(caches.names())}")
    strategy = caches.get(mode)
    if family is not None and family not in strategy.families:
        raise ConfigError(f"cache={mode} is not available for the {family} decoding family (it supports "
                          f"{', '.join(sorted(strategy.families))}); use another cache or cache=none")
    return strategy


@cache
def cache_options(rule: type[Options], mode: str) -> type[Options]:
    """The ``extra`` options of a rule under ``cache=mode``: the rule's plus the cache's own."""
    strategy = cache_strategy(mode)
    if strategy is None or strategy.Options is None:
        return rule
    return type(f"{rule.__name__}With{strategy.Options.__name__}", (rule, strategy.Options),
                {"__doc__": f"{rule.__doc__ or ''} Under cache={mode}: {strategy.Options.__doc__}",
                 "__module__": __name__})


def cache_reads(reads: frozenset[str], mode: str) -> frozenset[str]:
    """DecodingConfig fields a rule reads under ``cache=mode`` (``cache`` itself included)."""
    strategy = cache_strategy(mode)
    return frozenset(reads - (strategy.unread if strategy else frozenset())) | {"cache"}


class _Forward:
    """Forwards of one block for one cache mode; returns logits (B, K, V) for columns [lo, lo + K)
    (already combined for classifier-free guidance) and the NFE they cost."""

    def __init__(self, model, canvas: Canvas, cfg: DecodingConfig, opts: Options | None, lo: int, mode: str):
        self.model, self.canvas, self.cfg = model, canvas, cfg
        self.k = cfg.block_length
        self.shift = 1 if model.arch.shift_logits else 0  # Dream: column i is read from output i - 1
        self.lo = lo - self.shift  # first query column whose output we need
        copies = 2 if cfg.cfg_scale > 0 else 1
        self.positions = canvas.positions.repeat(copies, 1)
        self.key_mask = canvas.valid.repeat(copies, 1)[:, None, None, :]
        cache_class = CACHES.get(mode)  # none: no cache, every step is a full pass
        self.cache = cache_class(model.net.args.n_layers, self.lo, lo + self.k) if cache_class else None
        # the official cached loops always run a cached pass after the first one (see the module's NFE note)
        self.official_pass_after_first = self.cache is not None

    def _ids(self, x: torch.Tensor) -> torch.Tensor:
        if self.cfg.cfg_scale <= 0:
            return x
        prompt = self.canvas.valid.clone()
        prompt[:, self.canvas.gen_start:] = False
        return torch.cat([x, x.masked_fill(prompt, self.model.mask_id)])

    def _combine(self, logits: torch.Tensor) -> tuple[torch.Tensor, int]:
        if self.cfg.cfg_scale <= 0:
            return logits, 1
        cond, unc = logits.chunk(2)
        return unc + (self.cfg.cfg_scale + 1) * (cond - unc), 2

    def __call__(self, x: torch.Tensor, first: bool) -> tuple[torch.Tensor, int]:
        """Step 0 (``first``) or no cache: full pass (filling the cache); otherwise the cached window."""
        ids = self._ids(x)
        if first or self.cache is None:
            logits = self.model.net(ids, self.positions, self.key_mask, self.cache,
                                    logits_range=(self.lo, self.lo + self.k))
            return self._combine(logits)
        start, end = self.cache.query_columns(ids.shape[1])
        logits = self.model.net(ids[:, start:end], self.positions[:, start:end], self.key_mask, self.cache,
                                logits_range=(0, self.k))
        return self._combine(logits)


@kv_cache("prefix", families=frozenset({"mdm", "dream"}), columns=True)
def prefix(model, canvas: Canvas, cfg: DecodingConfig, opts: Options, lo: int) -> _Forward:
    """Fast-dLLM's prefix cache: the columns before the block, from its block-start pass."""
    return _Forward(model, canvas, cfg, opts, lo, "prefix")


@kv_cache("dual", families=frozenset({"mdm", "dream"}), columns=True)
def dual(model, canvas: Canvas, cfg: DecodingConfig, opts: Options, lo: int) -> _Forward:
    """Fast-dLLM's dual cache: every column but the block's, from its block-start pass."""
    return _Forward(model, canvas, cfg, opts, lo, "dual")


PREFIX, DUAL = prefix, dual


def decode_cached(model, canvas: Canvas, cfg: DecodingConfig, opts: LoopOptions, gens: list[torch.Generator], policy,
                  mode: str | None = None, columns=None) -> DecodeResult:
    """The reference block loop with a registered cache's forwards; ``policy`` as in :mod:`.mdm`,
    ``mode`` none or a name in ``registry.caches`` (default ``cfg.cache``). ``columns(model, canvas, cfg, opts,
    gens)``, from a decoder that selects the canvas columns of each block's forward (DPad), runs the cache
    over that selection (the caches that declare ``columns``: Fast-dLLM's, tested against the authors' DPad loops)."""
    mode = mode or cfg.cache
    strategy = cache_strategy(mode, model.arch.decoding_family)

    def forward_of(view: Canvas, lo: int):
        return strategy.forward(model, view, cfg, opts, lo) if strategy else _Forward(model, view, cfg, opts, lo,
                                                                                        "none")

    if columns is None:
        block_forward = lambda lo: forward_of(canvas, lo)  # noqa: E731
    else:
        block_forward = partial(columns(model, canvas, cfg, opts, gens).block_forward, forward_of=forward_of)
    return decode_masked_diffusion(model, canvas, cfg, opts, gens, policy, block_forward=block_forward)


def cached_decoder(reference: DecoderSpec, mode: str) -> DecoderSpec:
    """The cached counterpart of a registered reference decoder: the same rule and declarations, the cached
    loop, the cache's fields and options."""
    if not reference.cacheable:
        raise ConfigError(f"the Fast-dLLM engine has no cached version of decoder {reference.name!r}; "
                          "use the torch engine for it")
    strategy = cache_strategy(mode)
    if reference.columns is not None and strategy is not None and not strategy.columns:
        usable = ["none", *(name for name in caches.names() if caches.get(name).columns)]
        raise ConfigError(f"cache={mode} does not run over the column selection of decoder {reference.name!r}; "
                          f"use cache={' or '.join(usable)}")
    reads = cache_reads(reference.reads, mode)
    return replace(reference, name=f"fastdllm:{reference.name}", aliases=(),
                   loop=partial(decode_cached, mode=mode, columns=reference.columns), reads=reads,
                   Options=cache_options(reference.Options, mode), supports_cfg="cfg_scale" in reads,
                   rules=dict(reference.rules))
