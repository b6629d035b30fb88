"""The small model API every engine implements (torch, fastdllm, lmdeploy, sglang, replay, ...).

An engine turns :class:`GenerationRequest` s into :class:`~dare.harness.records.Generation` s under
one :class:`~dare.harness.records.DecodingConfig`. Requests carry their own seed, derived from the
run seed, the sample id and the sample index, so a request decodes the same whatever batch it is in.
Engines are registered by name in ``registry.engines`` (lazily) and built with :class:`EngineContext`.
"""

from __future__ import annotations

import functools
from collections.abc import Container, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .config import ModelSpec
from .options import DEFAULT_CAPABILITIES, Capabilities, DecoderInfo, NoOptions, Options, capabilities, parse_options
from .records import DecodingConfig, Generation, Message, ModelInfo, sha256_text


@dataclass(frozen=True)
class GenerationRequest:
    """One generation to produce: the k-th (``index``) output for ``sample_id`` from chat ``messages``."""

    sample_id: str
    index: int
    messages: tuple[Message, ...]
    seed: int

    @functools.cached_property  # computed once a request: the runner keys the cache with it in several passes
    def prompt_hash(self) -> str:
        return sha256_text("\x1e".join(f"{m.role}\x1f{m.content}" for m in self.messages))[:16]


def request_seed(base_seed: int, sample_id: str, index: int) -> int:
    """Per-request seed: independent of batching and order, distinct across samples and k."""
    return int(sha256_text(f"{base_seed}/{sample_id}/{index}")[:8], 16)


@dataclass(frozen=True)
class EngineContext:
    """What the CLI resolved for an engine: the model (name, config, checkpoint path) and options."""

    model_name: str
    model_spec: ModelSpec | None = None
    model_path: Path | None = None
    completions: Path | None = None
    device: str | None = None
    options: Any = field(default_factory=dict)
    """The engine's validated :class:`~dare.harness.options.Options` (a plain dict from older callers)."""
    sample_ids: Container[str] = frozenset()
    """Ids of every sample of the suite (before --limit): lets engines that read outputs produced
    elsewhere (replay) tell an unknown id from one that is merely outside the limit. Membership and size
    only: the plan gives a :class:`~dare.harness.keyindex.SortedKeys` (16 bytes an id)."""
    cache_dir: Path | None = None
    """The run's cache directory (``--cache-dir``, else ``OUT/.cache``), where an engine keeps files it derives
    for the run (PC-Sampler's background table built for a tokenizer); None: ``$DARE_CACHE_DIR``, else a
    directory private to this user under the system temp dir."""


@runtime_checkable
class Engine(Protocol):
    """What the runner needs from a backend engine.

    What an engine can do is declared in ``capabilities``, its settings in ``Options``, the decoder a
    DecodingConfig selects (and the fields it reads) by ``decoder(decoding)`` and the settings that can
    change tokens by ``token_identity()`` (see :class:`EngineBase`, which gives the defaults).
    """

    name: str
    version: str

    def model_info(self) -> ModelInfo:
        """Identity of the model being evaluated; ``fingerprint`` keys the generation cache."""
        ...

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        """Check, before any generation, that the requests can be served (raise DareError otherwise)."""
        ...

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        """Generations for ``requests``, in order. Must not depend on how requests are batched."""
        ...


@runtime_checkable
class InProcessEngine(Engine, Protocol):
    """An engine that holds a live torch model (``capabilities.in_process_model``): what trainers use.

    Rollouts decode with it and the trainer updates the very network it decodes with, so a likelihood is
    computed on exactly the prompt the decoder saw and no weights are copied between the two.
    """

    @property
    def model(self) -> Any:
        """The loaded model (``dare.backends.models.loader.LoadedModel``: net, tokenizer, arch, special ids)."""
        ...

    def use_model(self, model: Any) -> None:
        """Decode with ``model`` from now on (a trainer's policy, or weights it filled in itself)."""
        ...

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the prompt the decoder sees for chat ``messages`` (chat template applied)."""
        ...


class EngineBase:
    """Declared defaults of an engine: no options, default capabilities, no decoder declaration.

    Subclasses set ``Options`` (the ``--set engine.X`` model), ``capabilities`` and, where they decode,
    :meth:`decoder`, which names the decoder a DecodingConfig selects and what it reads.
    """

    name: str = "base"
    version: str = "0"
    Options: type[Options] = NoOptions
    capabilities: Capabilities = DEFAULT_CAPABILITIES

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx

    @property
    def options(self) -> Options:
        """The validated options (callers that build an engine directly may pass a plain dict)."""
        opts = self.ctx.options
        if not isinstance(opts, Options):  # one line with a did-you-mean, as the plan gives (a ConfigError)
            opts = parse_options(self.Options, dict(opts or {}), "engine")
            self.ctx = replace(self.ctx, options=opts)  # validated once
        return opts

    def decoding_defaults(self) -> dict:
        """DecodingConfig fields applied under the user's settings (declared by ``capabilities.decoding_defaults``)."""
        return {}

    def decoder(self, decoding: DecodingConfig) -> DecoderInfo | None:
        """The decoder ``decoding`` selects and the fields it reads; None: the engine declares none
        (every field counts as read)."""
        return None

    def token_identity(self) -> dict[str, Any]:
        """Engine settings that can change tokens (dtype, kernel, device class...): part of the generation
        cache key and of the leaderboard's comparability key."""
        return self.options.identity()


def generate(engine: Any, requests: list[GenerationRequest], decoding: DecodingConfig,
             decoder: DecoderInfo | None = None, options: Options | None = None) -> list[Generation]:
    """``engine.generate``; an engine that declares ``typed_decoding`` (the torch engines) also gets the decoder
    and the typed options the resolver built, so it looks nothing up again. (A wrapper, such as the Ray
    replicas, passes the DecodingConfig on: each replica resolves the same decoder and options from it.)"""
    if capabilities(engine).typed_decoding and decoder is not None and options is not None:
        return engine.generate(requests, decoding, decoder=decoder, options=options)
    return engine.generate(requests, decoding)


def declared_decoder(engine: Any, decoding: DecodingConfig) -> DecoderInfo | None:
    """The decoder an engine declares for ``decoding`` (None where it declares none: every field is read)."""
    declares = isinstance(engine, EngineBase) or capabilities(engine).declares_decoding
    return engine.decoder(decoding) if declares else None


def declared_token_identity(engine: Any) -> dict[str, Any]:
    """The engine settings that can change tokens, where the engine declares them (else empty)."""
    declares = isinstance(engine, EngineBase) or capabilities(engine).declares_decoding
    return engine.token_identity() if declares else {}
