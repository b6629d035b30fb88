"""Config-time checks of ``dare_model(...)``: what a task process would only find out later.

Under plain ``opencompass CONFIG`` a bad engine name, model name, checkpoint, decoding field or keyword
only surfaces in a task's log, and the CLI exits 0 with empty scores. These checks run while the config
file is read, and fail as :class:`ConfigTimeError`: a :class:`~dare.harness.errors.ConfigError` (DARE's
CLIs print its line and exit 2) that is also a ``SystemExit`` whose code is that line, so OpenCompass's
own CLI stops with exactly that one line on stderr and exit status 1, before any task starts.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any

from dare.harness import config as cfg
from dare.harness.engine import EngineContext
from dare.harness.errors import ConfigError, DareError
from dare.harness.models import resolve
from dare.harness.options import capabilities
from dare.harness.records import DecodingConfig
from dare.harness.registry import did_you_mean, engines
from dare.harness.resolve import resolve_decoding

from .scoring import estimator

# OpenCompass model-config keys that DareModel accepts and ignores, beside its own parameters.
OPENCOMPASS_MODEL_KEYS = ("generation_kwargs", "pred_postprocessor", "max_seq_len", "meta_template", "path")
DARE_MODEL_ARGS = ("abbr", "decoding", "batch_size", "num_gpus")


class ConfigTimeError(ConfigError, SystemExit):
    """A ConfigError that also ends an interpreter cleanly: uncaught, Python prints ``code`` (one line) and
    exits 1, where any other exception would print a traceback from inside mmengine's config parser."""

    def __init__(self, problems: list[str] | str, source: str | None = None):
        super().__init__(problems, source)
        self.code = str(self)  # Exception.__init__ does not run SystemExit's, which would set it


def at_config_time(source: str):
    """Decorator: any DareError raised by the wrapped config builder becomes a :class:`ConfigTimeError`."""

    def wrap(fn):
        @functools.wraps(fn)
        def checked(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except ConfigTimeError:
                raise
            except DareError as exc:
                raise ConfigTimeError(str(exc), source=source) from None

        return checked

    return wrap


def model_keywords() -> list[str]:
    """Every keyword ``dare_model`` accepts: its own, DareModel's parameters, OpenCompass's model keys."""
    from .model import DareModel

    params = [p for p in inspect.signature(DareModel.__init__).parameters.values()
              if p.name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]
    return sorted({*DARE_MODEL_ARGS, *(p.name for p in params), *OPENCOMPASS_MODEL_KEYS})


def check_model(engine: str, model: str | None, decoding: dict | None, options: dict[str, Any]) -> DecodingConfig:
    """Validate a ``dare_model`` call; returns its DecodingConfig as the engine will decode it (the one
    resolver, :func:`~dare.harness.resolve.resolve_decoding`: model settings for the suite, the engine's
    defaults, then ``decoding``, checked against the decoder the engine declares, so a config refuses what
    ``dare-eval`` refuses). Raises a DareError naming the first problem and its fix."""
    if "max_out_len" in options:
        raise ConfigError("max_out_len is DARE's decoding.gen_length; pass decoding=dict(gen_length=N) instead")
    known = model_keywords()
    for key in options:
        if key not in known:
            raise ConfigError(f"unexpected keyword {key}={options[key]!r}{did_you_mean(key, known)}; "
                              f"keywords: {', '.join(known)}")
    engine_cls = engines.get(engine)  # an unknown engine: one line with did-you-mean
    model_path = options.get("model_path")
    needs_checkpoint = capabilities(engine_cls).needs_checkpoint
    if model and needs_checkpoint and cfg.model_name(model) not in cfg.names("models") and model_path is None:
        cfg.model(model)  # an unknown model: one line with did-you-mean and the list
    # The same resolution DareModel does in the task process: a missing checkpoint fails here instead.
    resolved = resolve(model or (None if model_path else engine), model_path, needs_checkpoint)
    fields = sorted(DecodingConfig.model_fields)
    for key in decoding or {}:
        if key not in fields:
            raise ConfigError(f"decoding field {key!r} does not exist{did_you_mean(key, fields)}; "
                              f"fields: {', '.join(fields)}")
    completions = options.get("completions")
    built = engine_cls(EngineContext(model_name=resolved.name, model_spec=resolved.spec, model_path=resolved.path,
                                     completions=Path(completions) if completions else None,
                                     device=options.get("device"),
                                     options=dict(options.get("engine_options") or {})))  # weights load lazily
    if options.get("likelihood") or options.get("likelihood_options"):
        estimator(built, options.get("likelihood"), options.get("likelihood_options"))  # PPL datasets' scorer
    spec = cfg.model(model) if model and cfg.model_name(model) in cfg.names("models") else None
    return resolve_decoding(built, spec, options.get("suite") or "default", dict(decoding or {}),
                            source="decoding").config
