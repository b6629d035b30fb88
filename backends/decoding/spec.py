"""Declared decoders and KV caches: one frozen spec per strategy, registered by a decorator.

A decoder is a *loop* (:func:`.mdm.decode_masked_diffusion`, :func:`.block.decode_blocks`, or a strategy's own)
run with a *commit rule*. :func:`decoder` registers a :class:`DecoderSpec` in ``registry.decoders`` under
``<family>:<remasking>``: the DecodingConfig fields it reads, its typed ``extra`` Options (every default lives
there, once), the rule each commit field sets, its NFE convention and its capabilities. The engines, the
resolver (``--dry-run``, run.json, the cache key) and ``--list`` read only the spec; the loop hands the rule
the validated Options object, so no decoder reads ``DecodingConfig.extra``. :func:`kv_cache` does the same
for the forward strategies of the cached engine (``registry.caches``). Adding a strategy is one module that
declares its Options and decorates its rule, imported by ``decoding/__init__.py`` (or by a plugin module).

Signatures (B rows, K block length, V vocabulary):
    loop(model, canvas, cfg, opts, gens, rule) -> DecodeResult
    masked-diffusion rule: (logits (B,K,V), masked (B,K), quota (B,) | None, step, steps, gens, cfg, opts, model)
                           -> (commit (B,K) bool, x0 (B,K))
    block rule:            (conf (B,K), candidates (B,K), quota (B,) | None, cfg, opts) -> commit (B,K) bool
    cache forward:         (model, canvas, cfg, opts, lo) -> forward(x, first) -> (logits (B,K,V), NFE cost)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dare.harness.options import Options
from dare.harness.records import DecodingConfig
from dare.harness.registry import caches, decoders
from dare.harness.resolve import typed_extra

#: ``extra`` may hold the torch decoders' options flat or under this key (``extra.torch.step_schedule``)
NAMESPACES = frozenset({"torch"})


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one registered object per strategy
class DecoderSpec:
    """A registered decoder: what it is, what it reads and what it can do.

    name: ``<family>:<remasking>``; loop: the loop that runs it; rule: the commit rule the loop calls (None
    when the loop is the strategy's own and holds its rule); reads: the DecodingConfig fields it reads;
    Options: its typed ``extra`` options; rules: DecodingConfig field -> the commit rule that field sets here
    (``threshold`` means different rules in different decoders); nfe: how it counts forward passes.
    Capabilities: supports_cfg (classifier-free guidance), cacheable (its rule runs under every KV cache of
    ``registry.caches``), columns (its own selection of each block's forward columns, DPad; None: all),
    batch_independent (a row's output does not depend on the rows beside it), records_trajectory.
    bind: ``(options, tokenizer, cache_dir) -> options``, the Options completed from the model's tokenizer at
    plan time (their ``bound`` fields: what the rule will read beyond its settings, e.g. PC-Sampler's table;
    ``cache_dir``: the run's cache directory, for what the binding derives, or None), or None.
    """

    name: str
    loop: Callable
    rule: Callable | None
    reads: frozenset[str]
    Options: type[Options]
    rules: Mapping[str, str] = field(default_factory=dict)
    nfe: str = ""
    aliases: tuple[str, ...] = ()
    supports_cfg: bool = False
    cacheable: bool = False
    columns: type | None = None
    batch_independent: bool = True
    records_trajectory: bool = True
    version: str = "1"
    bind: Callable | None = None

    def __post_init__(self):
        object.__setattr__(self, "rules", {k: v for k, v in self.rules.items() if k in self.reads})

    @property
    def family(self) -> str:
        return self.name.split(":", 1)[0]

    @property
    def remasking(self) -> str:
        return self.name.split(":", 1)[1]

    def options(self, cfg: DecodingConfig) -> Options:
        """The config's options validated into :attr:`Options`, as the resolver does for a plan (for callers
        that decode without one: tests, benchmarks)."""
        return typed_extra(cfg, self.Options, NAMESPACES)

    def __call__(self, model, canvas, cfg: DecodingConfig, gens, opts: Options | None = None):
        """Decode ``canvas``: the loop with this spec's rule, under ``opts`` (default: :meth:`options`)."""
        return self.loop(model, canvas, cfg, self.options(cfg) if opts is None else opts, gens, self.rule)


def decoder(name: str, *, reads: frozenset[str], options: type[Options], loop: Callable | None = None,
            rules: Mapping[str, str] | None = None, nfe: str = "", aliases: tuple[str, ...] = (),
            supports_cfg: bool = False, cacheable: bool = False, columns: type | None = None,
            batch_independent: bool = True, version: str = "1", bind: Callable | None = None):
    """Decorator: register the decorated commit rule, run by ``loop``, as decoder ``name``. With ``loop=None``
    the decorated function is the strategy's own loop (its rule inside). Returns the function unchanged."""

    def register(function: Callable) -> Callable:
        spec = DecoderSpec(name, loop or function, None if loop is None else function, frozenset(reads), options,
                           dict(rules or {}), nfe, tuple(aliases), supports_cfg, cacheable, columns,
                           batch_independent, version=version, bind=bind)
        decoders.register(name, spec, aliases=spec.aliases)
        return function

    return register


@dataclass(frozen=True)
class CacheSpec:
    """A KV cache of the cached engine, registered in ``registry.caches`` under its ``DecodingConfig.cache``
    name. It replaces the forward of the masked-diffusion block loop, so it runs under every cacheable rule
    (N caches and M rules make N + M parts). forward: ``(model, canvas, cfg, opts, lo) -> block forward``;
    families: the decoding families it serves; Options: its typed ``extra`` options (added to the rule's);
    unread: the rule's DecodingConfig fields it cannot honour (refused when set, left out of the record);
    columns: whether it runs over a decoder's column selection (DPad)."""

    name: str
    forward: Callable
    families: frozenset[str]
    Options: type[Options] | None = None
    unread: frozenset[str] = frozenset()
    columns: bool = False


def kv_cache(name: str, *, families: frozenset[str], options: type[Options] | None = None,
             unread: frozenset[str] = frozenset(), columns: bool = False):
    """Decorator: register the decorated block-forward builder as the KV cache ``name``; returns the spec."""

    def register(forward: Callable) -> CacheSpec:
        spec = CacheSpec(name, forward, frozenset(families), options, frozenset(unread), columns)
        caches.register(name, spec)
        return spec

    return register


def decoder_specs() -> dict[str, DecoderSpec]:
    """Every registered decoder by its name (aliases left out)."""
    out = {}
    for name in decoders.names():
        spec = decoders.get(name)
        if isinstance(spec, DecoderSpec) and spec.name == name:
            out[name] = spec
    return out
