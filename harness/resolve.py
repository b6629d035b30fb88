"""The one resolver: (engine, model spec, suite, settings) -> the decoding a run uses, checked and typed.

Every caller that decodes goes through :func:`resolve_decoding`: ``dare.plan`` (dare-eval, ``--compare``, the
benchmarks), dare-train's rollouts and evaluations, the OpenCompass classes and their validation. It layers
the model's settings for the suite, the engine's declared defaults and the caller's settings into one
:class:`~dare.harness.records.DecodingConfig`, asks the engine once which decoder that config selects (its
:class:`~dare.harness.options.DecoderInfo`, with the backend's spec), refuses a field the decoder does not
read when the caller set it (resetting it when it came from a model's settings), and validates ``extra``
into the decoder's typed Options. The result, :class:`ResolvedDecoding`, is what engines decode with, what
run.json records and what the caches key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import config as cfg
from .engine import declared_decoder
from .errors import ConfigError
from .options import HARNESS_FIELDS, DecoderInfo, Options, capabilities, parse_options
from .records import DecodingConfig

_DEFAULTS = DecodingConfig()


@dataclass(frozen=True)
class ResolvedDecoding:
    """A DecodingConfig as one engine will decode it.

    config: the settings, unread fields at their defaults (its ``config_hash()`` keys the generation cache);
    decoder: what the engine declared for them (None: the engine declares nothing, every field counts as read);
    options: the decoder's ``extra`` settings, validated into its Options model (None with no decoder);
    fields: the DecodingConfig fields recorded in run.json (None: all).
    """

    config: DecodingConfig
    decoder: DecoderInfo | None = None
    options: Options | None = None
    fields: list[str] | None = None


def layered(spec: cfg.ModelSpec | None, suite: str, settings: dict[str, Any] | None = None,
            engine: Any = None, source: str = "--set") -> DecodingConfig:
    """The model's settings for ``suite``, then the engine's declared defaults, then ``settings``
    (every invalid field reported at once)."""
    base = spec.decoding_for(suite) if spec else {}
    defaults = engine.decoding_defaults() if engine is not None and capabilities(engine).decoding_defaults else {}
    return cfg.decoding_with_overrides({**base, **defaults}, dict(settings or {}), source=source)


def check(decoding: DecodingConfig, decoder: DecoderInfo | None, explicit: set[str],
          source: str = "--set") -> ResolvedDecoding:
    """``decoding`` checked against ``decoder``: a field in ``explicit`` (set by the caller) that the decoder
    does not read is refused, naming the decoders that do; an unread field from a model's settings is reset
    to its default; ``extra`` is validated into the decoder's Options (unknown keys refused). A namespaced
    ``extra.<engine>`` sub-dict holds the same options; a key given both ways keeps its top-level value."""
    if decoder is None:
        return ResolvedDecoding(decoding)
    reads = decoder.reads | HARNESS_FIELDS
    problems, reset = [], {}
    for name in DecodingConfig.model_fields:
        if name in reads or name == "extra" or getattr(decoding, name) == getattr(_DEFAULTS, name):
            continue
        if name in explicit:
            readers = [d for d, fields in sorted(decoder.catalog.items()) if name in fields]
            who = f"it is read by {', '.join(readers)}" if readers else "no decoder of this engine reads it"
            problems.append(f"{name}={getattr(decoding, name)!r} is not read by decoder {decoder.name} ({who}); "
                            f"drop it or choose a decoder that reads it")
        reset[name] = getattr(_DEFAULTS, name)
    problems += foreign_options(flat_extra(decoding, decoder.namespaces), decoder)
    if problems:
        raise ConfigError(problems, source=source)
    options = typed_extra(decoding, decoder.options, decoder.namespaces, source)
    if decoder.bind is not None:
        options = decoder.bind(options)  # what the decoder reads from the model beyond its settings
    decoding = decoding.model_copy(update=reset) if reset else decoding
    fields = sorted((reads & set(DecodingConfig.model_fields)) | ({"extra"} if decoding.extra else set()))
    return ResolvedDecoding(decoding, decoder, options, fields)


def foreign_options(extra: dict[str, Any], decoder: DecoderInfo) -> list[str]:
    """One line per ``extra`` option this decoder lacks that another decoder of the engine reads, naming those
    (an option no decoder reads is left to the Options model's did-you-mean)."""
    problems = []
    for key in sorted(set(extra) - set(decoder.options.model_fields)):
        readers = [name for name, fields in sorted(decoder.option_catalog.items()) if key in fields]
        if readers:
            problems.append(f"extra.{key} is not an option of decoder {decoder.name} (it is read by "
                            f"{', '.join(readers)}); drop it or choose a decoder that reads it")
    return problems


def typed_extra(decoding: DecodingConfig, model: type[Options], namespaces: frozenset[str] = frozenset(),
                source: str = "--set") -> Options:
    """The config's ``extra`` validated into a decoder's Options ``model`` (unknown keys refused, one line each)."""
    return parse_options(model, flat_extra(decoding, namespaces), "extra", source)


def flat_extra(decoding: DecodingConfig, namespaces: frozenset[str]) -> dict[str, Any]:
    """``extra`` with the namespaced sub-dicts (``extra.torch.X``) merged under the top-level keys."""
    flat: dict[str, Any] = {}
    for space in sorted(namespaces & set(decoding.extra)):
        flat.update(decoding.extra[space] or {})
    flat.update({k: v for k, v in decoding.extra.items() if k not in namespaces})
    return flat


def resolve_decoding(engine: Any, spec: cfg.ModelSpec | None, suite: str, settings: dict[str, Any] | None = None, *,
            explicit: set[str] | None = None, base: DecodingConfig | None = None,
            source: str = "--set") -> ResolvedDecoding:
    """The decoding ``engine`` runs for ``suite``: ``base`` (a complete config) or the model's settings and
    the engine's defaults, under ``settings``; then checked against the decoder the engine declares.
    ``explicit``: the fields the caller set (default: the keys of ``settings``)."""
    if base is not None:
        decoding = cfg.decoding_with_overrides(base.model_dump(), dict(settings or {}), source=source)
    else:
        decoding = layered(spec, suite, settings, engine, source)
    given = set(settings or {}) if explicit is None else explicit
    if engine is None:
        return ResolvedDecoding(decoding)
    return check(decoding, declared_decoder(engine, decoding), given, source)
