"""The plugin API: likelihood estimators and algorithms, registered by name (N + M files, not N x M).

An :class:`Estimator` turns a :class:`~.batch.RolloutBatch` and a policy into per-token log-likelihood
estimates; it draws its randomness (masks, noise levels) once in :meth:`Estimator.draw` so the behaviour,
current and reference passes share it. An :class:`Algorithm` says what the rollout must record
(:class:`Needs`), forms advantages and computes the loss, calling an estimator *by name* — it never
re-implements one. Both kinds register through decorators into ``dare.harness.registry.estimators`` /
``algorithms``; third-party packages do the same from a module named in the ``dare.plugins`` entry point.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from pydantic import BaseModel, ConfigDict, Field, create_model

from dare.harness.errors import ConfigError, RegistryError
from dare.harness.registry import advantages as advantage_registry
from dare.harness.registry import algorithms, did_you_mean, estimators
from dare.harness.registry import losses as loss_registry

from .batch import Estimate, LossOutput, RolloutBatch
from .ops import masked_mean


@dataclass(frozen=True)
class Needs:
    """What an algorithm needs from the trainer before its loss can run.

    rollout: sample completions from the policy (False: supervised pairs from the data).
    rewards: score rollouts with the suite's verifier.
    trajectory: per-token commit steps from the decoder (exact per-step likelihoods).
    reference: log-probs under the frozen initial model (KL terms, DPO).
    attention: "block_causal" or "bidirectional" when the method only applies to one model family.
    pairs: (prompt, chosen, rejected) preference pairs from the data instead of gold completions (DPO, VRPO).
    """

    rollout: bool = True
    rewards: bool = True
    trajectory: bool = False
    reference: bool = False
    attention: str | None = None
    pairs: bool = False


@runtime_checkable
class Policy(Protocol):
    """What estimators read from a trainable model (:class:`~.policy.ModelPolicy`, the tests' toy policies).

    block_size is None for bidirectional (masked-diffusion) models, else the block length K; shift_logits is
    Dream's shift (position i read from hidden state i - 1).
    """

    attention: str
    block_size: int | None
    shift_logits: bool
    mask_id: int
    pad_id: int
    eos_id: int

    def token_logp(self, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
                   index: torch.Tensor, targets: torch.Tensor,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """input_ids/positions (B, L), mask (B, 1, L, L) | None, index/targets (B, N) -> log p (B, N),
        entropy (B, N)."""
        ...


CAPABILITIES = frozenset({"samples", "bounds", "trajectory", "left_to_right"})
"""What an estimator may declare: ``samples`` (n Monte-Carlo draws per sequence, the ``samples`` attribute,
split per draw by BGPO, set by DPO/VRPO), ``bounds`` (lower and upper bounds of log p, SPG), ``trajectory``
(replays the rollout's recorded step map, so the rollout must record it), ``left_to_right`` (exact only for
rollouts decoded one token per step from left to right, JustGRPO)."""


class Estimator:
    """Base class of likelihood estimators. Subclasses set ``name`` (by the decorator), ``forwards``
    (model forward passes per sequence) and ``capabilities`` (a subset of :data:`CAPABILITIES`), and
    implement :meth:`draw` and :meth:`estimate`."""

    name: ClassVar[str] = "base"
    forwards: ClassVar[int] = 1
    capabilities: ClassVar[frozenset[str]] = frozenset()
    Options: ClassVar[type[BaseModel]]
    """Typed options (pydantic, unknown keys refused): declared by the class, else made from ``__init__``'s
    parameters by the ``@estimator`` decorator."""

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Random draws for ``batch`` (tensors with batch dim first, on CPU); empty for exact estimators."""
        return {}

    def estimate(self, policy: Policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        """Per-token estimates (B, T) under ``policy`` with the draws ``noise``."""
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        """The estimator's settings, recorded with the run."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class AlgorithmConfig(BaseModel):
    """Settings shared by every algorithm; subclasses add theirs. Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    estimator: str = Field("auto", description="likelihood estimator name (registry 'likelihood estimator')")
    estimator_args: dict[str, Any] = Field(default_factory=dict, description="options of the estimator, typed by "
                                           "its Options model (checked when the algorithm is built)")
    inner_steps: int = Field(1, ge=1, description="optimizer updates per rollout batch (PPO epochs x mini-batches)")
    resample_noise: bool = Field(False, description="draw fresh estimator noise for every inner step (d1 original)")
    noise_seed: int | None = Field(None, description="re-seed the estimator noise with this constant at every "
                                   "step (DARE's fixed seed 42 quirk); None: seeded by run seed and step")
    count_padding: bool = Field(False, description="count the tail after the first EOS in likelihoods and means "
                                "(DARE for LLaDA/Dream); the papers mask it")


class RolloutAdditions(BaseModel):
    """Base of an algorithm's typed additions to its rollouts' DecodingConfig (``Algorithm.RolloutAdditions``).

    A subclass declares one documented field per setting. A field named like a DecodingConfig field sets it;
    any other is a decoder option and goes into ``extra`` (its name is the decoder's option name); None adds
    nothing. The trainer checks the result against the decoder exactly as an evaluation's settings are
    checked, and records the additions in ``RUN/rollout.json`` and the evaluation's run.json.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def settings(self, decoding) -> dict[str, Any]:
        """DecodingConfig overrides on top of ``decoding``: the set fields, decoder options merged into its
        ``extra`` (``extra`` only when that changes it)."""
        from dare.harness.records import DecodingConfig

        values = {k: v for k, v in self.model_dump(mode="json").items() if v is not None}
        fields = set(DecodingConfig.model_fields) - {"extra"}
        out = {k: v for k, v in values.items() if k in fields}
        extra = decoding.extra_with({k: v for k, v in values.items() if k not in fields})
        if extra is not None:
            out["extra"] = extra
        return out


class Algorithm:
    """Base class of training algorithms. A subclass declares, once each: ``needs`` (what the rollout must
    record), ``Config`` (its settings; the advantage estimator is the config's ``advantage``),
    ``policy_loss`` (a name in the loss registry, :mod:`dare.trainers.losses`) and ``default_estimator``
    (a likelihood estimator name, or one per model attention kind). It overrides a hook only where the method
    truly differs from these (rollout settings, ``prepare``, ``loss_mask``, ``reduce``, ``draw_noise``), or
    writes :meth:`loss` itself instead of naming a registered one."""

    name: ClassVar[str] = "base"
    needs: ClassVar[Needs] = Needs()
    Config: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    policy_loss: ClassVar[str | None] = None
    """Registered policy loss (``dare.harness.registry.losses``) that :meth:`loss` computes."""
    default_estimator: ClassVar[str | dict[str, str]] = {}
    """Estimator when the config says ``auto``: one name, or one per model attention kind."""
    RolloutAdditions: ClassVar[type[RolloutAdditions] | None] = None
    """The typed DecodingConfig settings this algorithm adds to its rollouts (:meth:`rollout_additions`)."""

    def __init__(self, config: AlgorithmConfig | None = None):
        self.config = config or self.Config()
        self.estimator: Estimator | None = None

    def requirements(self) -> Needs:
        """The needs of this configured instance: a KL coefficient > 0 adds the reference model, an estimator
        that replays step maps (capability ``trajectory``) adds the trajectory."""
        beta = getattr(self.config, "beta", 0.0) or 0.0
        named = self.config.estimator
        replays = named != "auto" and "trajectory" in estimators.get(named).capabilities
        return Needs(**{**vars(self.needs), "reference": self.needs.reference or beta > 0,
                        "trajectory": self.needs.trajectory or bool(replays)})

    def estimator_name(self, attention: str) -> str:
        """The estimator this algorithm uses on a model whose attention kind is ``attention``."""
        name = self.config.estimator
        if name != "auto":
            return name
        default = self.default_estimator
        if isinstance(default, str):
            return default
        return default.get(attention) or next(iter(default.values()), "")

    def estimator_names(self) -> list[str]:
        """Every estimator this configured algorithm may bind (the named one, or each declared default)."""
        if self.config.estimator != "auto":
            return [self.config.estimator]
        default = self.default_estimator
        return [default] if isinstance(default, str) else sorted(set(default.values()))

    def bind(self, attention: str) -> Estimator:
        """Build the estimator for a model whose attention kind is ``attention``."""
        need = self.needs.attention
        if need and need != attention:
            raise ConfigError(f"algorithm {self.name!r} needs a {need.replace('_', '-')} model, "
                              f"this checkpoint is {attention.replace('_', '-')}; pick another --algo or model")
        name = self.estimator_name(attention)
        self.estimator = build_estimator(name, self.estimator_options(name))
        return self.estimator

    def estimator_options(self, name: str) -> dict[str, Any]:
        """Options the estimator ``name`` is built with. Default: the config's ``estimator_args``."""
        return dict(self.config.estimator_args)

    @property
    def num_noise_sets(self) -> int:
        return self.config.inner_steps if self.config.resample_noise else 1

    def draw_noise(self, estimator: Estimator, batch: RolloutBatch, generator: torch.Generator) -> list[dict]:
        """The S noise sets of a step, shared by the old, reference and current passes. Default: one estimator
        draw per set; BGPO splits one stratified draw into per-sample sets (per-sample old log-probs)."""
        return [estimator.draw(batch, generator) for _ in range(self.num_noise_sets)]

    def rollout_additions(self, decoding, arch) -> RolloutAdditions | None:
        """The DecodingConfig settings this algorithm's rollouts add to the evaluation ``decoding``, as an
        instance of its :attr:`RolloutAdditions` (CJ-GRPO's step schedule), or None; ``arch`` is the model's
        architecture entry. The user's ``rollout_decoding`` still wins; the trainer checks the result against
        the decoder and records it."""
        return None

    def rollout_decoding(self, decoding, arch) -> dict[str, Any]:
        """The DecodingConfig overrides of :meth:`rollout_additions` on top of ``decoding`` (empty: none)."""
        additions = self.rollout_additions(decoding, arch)
        return additions.settings(decoding) if additions is not None else {}

    def rollout(self, engine, items, decoding, seed: int, step: int, count_padding: bool, trajectory: bool):
        """Decode the step's ``items``: (batch, generations item-major, ``decoding.num_samples`` per item).
        Default: independent samples (:func:`~.training.rollout.rollout_batch`); d-TreeRPO grows trees."""
        from .training.rollout import rollout_batch

        return rollout_batch(engine, items, decoding, seed, count_padding, trajectory)

    def rollout_plan(self, decoding) -> dict[str, Any] | None:
        """What a rollout of its own records in ``RUN/rollout.json`` (``rollout_mode``): its shape and cost; None
        for the default rollout."""
        return None

    def row_rewards(self, batch: RolloutBatch, rewards: torch.Tensor) -> torch.Tensor:
        """The batch rows' rewards (B,) from the generations' rewards: the same here; d-TreeRPO's rows are tree
        edges and take their child's value."""
        return rewards

    def check_rollout(self, decoding) -> None:
        """Refuse final rollout settings (the user's overrides applied) that this algorithm's likelihood
        cannot score, with a ConfigError naming the fix. Default: accept all."""

    def prepare(self, policy: Policy, batch: RolloutBatch, scorer) -> None:
        """Work after the rewards and before the estimator's draws that needs the policy or the verifiers;
        ``scorer(rows (N,), completions (N, T)) -> rewards (N,)`` grades any completions of batch rows with
        the step's verifiers (MDPO's rewards of intermediate predictions). Default: nothing."""

    def advantages(self, batch: RolloutBatch) -> torch.Tensor | None:
        """Per-sequence advantages (B,): the registered estimator the config names (``advantage``), or None
        for objectives without one (supervised, preference, MDPO's per-step advantages)."""
        name = getattr(self.config, "advantage", None)
        if name is None:
            return None
        return advantage_registry.get(name)(batch.rewards, batch.group_ids, self.config.advantage_eps)

    def loss_mask(self, batch: RolloutBatch) -> torch.Tensor:
        """Tokens (B, T) bool that enter a token-level loss; CJ-GRPO keeps only tokens with a recorded transition."""
        return batch.completion_mask

    def reduce(self, token_loss: torch.Tensor, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(loss, weight of this micro-batch) of a token-level loss: the token mean here; the trainer keeps it
        exact across micro-batches by weighting each with ``weight``."""
        return masked_mean(token_loss, mask), float(mask.sum())

    def loss(self, policy: Policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        """The loss of one micro-batch in one graph: the registered :attr:`policy_loss` (its terms summed)."""
        terms = list(self._registered_terms(policy, batch, inner_step))
        if len(terms) == 1:
            return terms[0]
        return LossOutput(loss=sum(t.loss for t in terms), weight=terms[-1].weight, metrics=terms[-1].metrics)

    def loss_terms(self, policy, batch: RolloutBatch, inner_step: int) -> Iterator[LossOutput]:
        """The loss as terms the trainer backpropagates one at a time, each graph freed before the next is
        built (BGPO: one per Monte-Carlo sample, so memory is constant in their number). The terms share the
        micro-batch ``weight``, their losses sum to :meth:`loss`'s, and the last carries the metrics.
        Default: the registered loss's terms, or the whole of an overridden :meth:`loss` as one term."""
        if type(self).loss is not Algorithm.loss:
            yield self.loss(policy, batch, inner_step)
            return
        yield from self._registered_terms(policy, batch, inner_step)

    def _registered_terms(self, policy, batch: RolloutBatch, inner_step: int) -> Iterator[LossOutput]:
        if self.policy_loss is None:
            raise NotImplementedError(f"algorithm {self.name!r} names no policy_loss and does not define loss()")
        out = loss_registry.get(self.policy_loss)(self, policy, batch, inner_step)
        if isinstance(out, LossOutput):
            yield out
        else:
            yield from out


def estimator_options_model(cls: type) -> type[BaseModel]:
    """The typed options of estimator class ``cls``: its own ``Options`` when it declares one, else a pydantic
    model of its ``__init__`` parameters (their annotations and defaults); unknown keys are refused."""
    own = cls.__dict__.get("Options")
    if own is not None:
        return own
    fields: dict[str, Any] = {}
    try:
        hints = typing.get_type_hints(cls.__init__)
    except (NameError, TypeError):  # an annotation that does not resolve here: untyped, still named
        hints = {}
    # a class without its own __init__ takes no options (object's signature would read as "any key")
    params = [] if cls.__init__ is object.__init__ else list(inspect.signature(cls.__init__).parameters.values())
    for p in params:
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (hints.get(p.name, Any), default)
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params[1:])  # **kwargs: the class takes any key
    config = ConfigDict(frozen=True, extra="allow" if open_ended else "forbid")
    return create_model(f"{cls.__name__}Options", __config__=config, **fields)


def estimator_problems(name: str, options: dict[str, Any]) -> list[str]:
    """Everything wrong with ``options`` for the estimator ``name`` (empty when they validate)."""
    from pydantic import ValidationError

    from dare.harness.config import validation_problems

    try:
        estimators.get(name).Options.model_validate(options)
    except ValidationError as exc:
        return [f"estimator {name!r}: {p}" for p in validation_problems(exc)]
    return []


def build_estimator(name: str, options: dict[str, Any]) -> Estimator:
    """The registered estimator ``name`` built with ``options``, validated by its typed Options first."""
    cls = estimators.get(name)
    problems = estimator_problems(name, options)
    if problems:
        raise ConfigError(problems, source="estimator_args")
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"estimator {name!r} rejects the options {sorted(options)}: {exc}") from exc


def build_algorithm(name: str, settings: dict[str, Any] | None = None) -> Algorithm:
    """The registered algorithm ``name`` configured with ``settings`` (all bad keys reported at once)."""
    from pydantic import ValidationError

    from dare.harness.config import validation_problems

    cls = algorithms.get(name)
    try:
        config = cls.Config.model_validate(settings or {})
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc), source=f"algorithm {name}") from exc
    algo = cls(config)
    problems = []
    for est in algo.estimator_names():  # estimator_args are typed by the estimator(s) they will build
        if est not in estimators:
            problems.append(f"estimator: unknown likelihood estimator {est!r}"
                            f"{did_you_mean(est, estimators.names())}")
        else:
            problems += estimator_problems(est, dict(config.estimator_args))
    if problems:
        raise ConfigError(problems, source=f"algorithm {name}")
    return algo


def algorithm(name: str, *, aliases: tuple[str, ...] = ()):
    """Class decorator: register an :class:`Algorithm` subclass as ``name``."""

    def register(cls: type[Algorithm]) -> type[Algorithm]:
        if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
            raise RegistryError(f"algorithm {name!r} must be a subclass of dare.trainers.Algorithm, got {cls!r}")
        cls.name = name
        algorithms.register(name, cls, aliases=aliases)
        return cls

    return register


def estimator(name: str, *, aliases: tuple[str, ...] = ()):
    """Class decorator: register an :class:`Estimator` subclass as ``name``."""

    def register(cls: type[Estimator]) -> type[Estimator]:
        if not (isinstance(cls, type) and issubclass(cls, Estimator)):
            raise RegistryError(f"estimator {name!r} must be a subclass of dare.trainers.Estimator, got {cls!r}")
        unknown = set(cls.capabilities) - CAPABILITIES
        if unknown:
            raise RegistryError(f"estimator {name!r} declares unknown capabilities {sorted(unknown)}; "
                                f"known: {sorted(CAPABILITIES)}")
        cls.name = name
        cls.Options = estimator_options_model(cls)
        estimators.register(name, cls, aliases=aliases)
        return cls

    return register
