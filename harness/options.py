"""Typed options and declared capabilities of the pluggable components (engines, decoders, verifiers).

Every component declares a pydantic :class:`Options` model: its settings with their types and defaults.
Unknown keys are errors with a did-you-mean, so ``--set engine.dtyp=...`` stops with exit 2 instead of
being ignored. What a component can do is declared in :class:`Capabilities` (never probed with
``hasattr``), and what a decoder reads of the :class:`~dare.harness.records.DecodingConfig` is declared
in :class:`DecoderInfo`; the plan (``harness/plan.py``) uses both to refuse settings that would change a
hash without changing an output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ConfigError
from .records import ComponentInfo
from .registry import did_you_mean


class Options(BaseModel):
    """Base of a component's options: frozen, unknown keys refused.

    ``execution_only`` names fields that cannot change an output (worker counts, thread counts); they
    are recorded but left out of :meth:`identity`, which keys caches and the leaderboard's columns.
    ``bound`` names fields the engine fills in from the model at plan time (:attr:`DecoderInfo.bind`, e.g. the
    sha256 of a data file the decoder reads): the DecodingConfig hash cannot see them, so the generation cache
    keys them beside it (:meth:`bound_identity`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    execution_only: ClassVar[frozenset[str]] = frozenset()
    bound: ClassVar[frozenset[str]] = frozenset()

    def identity(self) -> dict[str, Any]:
        """The fields that can change an output, defaults included (so an explicit default keys alike)."""
        return self.model_dump(mode="json", exclude=set(self.execution_only))

    def bound_identity(self) -> dict[str, Any]:
        """The :attr:`bound` fields and their values (empty for most components)."""
        return self.model_dump(mode="json", include=set(self.bound)) if self.bound else {}


class NoOptions(Options):
    """A component without settings."""


def parse_options(model: type[Options], values: dict[str, Any], where: str, source: str = "--set") -> Options:
    """Validate ``values`` into ``model``; every problem on one line, e.g.
    ``engine.dtyp: unknown option; did you mean 'dtype'? (options: attention, dtype, ...)``."""
    fields = sorted(model.model_fields)
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                listed = ", ".join(fields) if fields else "none"
                problems.append(f"{where}.{key}: unknown option{did_you_mean(key, fields)} (options: {listed})")
            else:
                problems.append(f"{where}.{key}: {err['msg'].removeprefix('Value error, ')} (got {err.get('input')!r})")
        raise ConfigError(problems, source=source) from None


@dataclass(frozen=True)
class Capabilities:
    """What an engine declares about itself (read by the plan instead of probing attributes).

    reads_completions: takes ``--completions`` (replay, opencompass over replay);
    needs_checkpoint: resolves a model checkpoint (False: the model name is a label);
    decoding_defaults: its ``decoding_defaults()`` returns fields to apply under the user's settings;
    records_trajectory: can return the per-token commit steps (CJ-GRPO, MDPO, TraceRL);
    in_process_model: holds a live torch model (trainers roll out and update it);
    own_steps: brings its own generate and verify steps (``run_steps(plan) -> runner.RunSteps``, e.g.
    OpenCompass's inference and evaluation tasks); the runner keeps the lock, the caches, resume and the record;
    declares_decoding: not an :class:`~dare.harness.engine.EngineBase`, yet answers ``decoder()`` and
    ``token_identity()`` (an engine that wraps another, e.g. opencompass over torch or replay);
    typed_decoding: ``generate(requests, decoding, decoder=, options=)`` takes the decoder and the typed options
    the resolver built (the torch engines), so the run looks its decoder up once;
    decodes_windows: ``decode_window(prompts, states, window, decoding, seeds)`` continues partial canvases for a
    window of decoding steps (the torch engines; d-TreeRPO's tree rollout);
    likelihood: scores ``log p(continuation | context)`` through registered estimators
    (:class:`~dare.harness.likelihood.LikelihoodEngine`: likelihood-scored benchmarks, lm-eval, OpenCompass PPL).
    """

    reads_completions: bool = False
    needs_checkpoint: bool = True
    decoding_defaults: bool = False
    records_trajectory: bool = False
    in_process_model: bool = False
    own_steps: bool = False
    typed_decoding: bool = False
    declares_decoding: bool = False
    decodes_windows: bool = False
    likelihood: bool = False


DEFAULT_CAPABILITIES = Capabilities()


def capabilities(engine: Any) -> Capabilities:
    """The declared capabilities of an engine class or instance. A plugin written before
    :class:`Capabilities` existed declares ``needs_checkpoint`` / ``reads_completions`` as plain class
    attributes; those are read as its declaration."""
    declared = getattr(engine, "capabilities", None)
    if isinstance(declared, Capabilities):
        return declared
    legacy = {k: bool(getattr(engine, k)) for k in ("needs_checkpoint", "reads_completions") if k in _attrs(engine)}
    return Capabilities(**legacy) if legacy else DEFAULT_CAPABILITIES


def _attrs(engine: Any) -> set[str]:
    cls = engine if isinstance(engine, type) else type(engine)
    return {name for klass in cls.__mro__ for name in vars(klass)}


#: DecodingConfig fields the harness itself reads for every engine: k and the batching of requests.
HARNESS_FIELDS = frozenset({"num_samples", "batch_size"})


@dataclass(frozen=True)
class DecoderInfo:
    """A decoder as chosen for one DecodingConfig: its registry name and version, the DecodingConfig
    fields it reads (besides :data:`HARNESS_FIELDS`), the model of its ``extra`` options, and
    ``catalog``: every decoder the engine could choose instead, name -> fields it reads (to tell a user
    which decoders read a field this one ignores)."""

    name: str
    version: str
    reads: frozenset[str]
    options: type[Options] = NoOptions
    catalog: dict[str, frozenset[str]] = field(default_factory=dict)
    namespaces: frozenset[str] = frozenset()
    """Keys of ``extra`` that hold a sub-dict of the same options (``extra.torch.step_schedule``)."""
    option_catalog: dict[str, frozenset[str]] = field(default_factory=dict)
    """Every decoder the engine could choose, name -> its ``extra`` option names (to tell a user which decoders
    read an option this one does not have)."""
    rules: dict[str, str] = field(default_factory=dict)
    """DecodingConfig field -> the rule it sets in this decoder, where decoders differ (``threshold``:
    Fast-dLLM's top-1 plus all >= tau, or SDAR's quota floor); shown by --dry-run and --list, recorded."""
    spec: Any = field(default=None, compare=False)
    """The engine's own declaration of the decoder (a backend's spec; opaque to the harness), handed back to
    the engine's ``generate`` with the typed options, so a run looks its decoder up once."""
    bind: Callable[[Options], Options] | None = field(default=None, compare=False)
    """``options -> options`` completed from the engine's model (the Options' ``bound`` fields), applied by the
    resolver after validation; None when the decoder reads nothing beyond its settings."""

    def component(self, extra: Options) -> ComponentInfo:
        return ComponentInfo(name=self.name, version=self.version, options=extra.model_dump(mode="json"),
                             rules=dict(self.rules))
