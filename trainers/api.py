"""The plugin API: likelihood estimators and algorithms, registered by name (N + M files, not N x M).

An :class:`Estimator` turns a :class:`~.batch.RolloutBatch` and a policy into per-token log-likelihood
estimates; it draws its randomness (masks, noise levels) once in :meth:`Estimator.draw` so the behaviour,
current and reference passes share it. An :class:`Algorithm` says what the rollout must record
(:class:`Needs`), forms advantages and computes the loss, calling an estimator *by name* — it never
re-implements one. Both kinds register through decorators into ``dare.harness.registry.estimators`` /
``algorithms``; third-party packages do the same from a module named in the ``dare.plugins`` entry point.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from pydantic import BaseModel, ConfigDict, Field

from dare.harness.errors import ConfigError, RegistryError
from dare.harness.registry import algorithms, estimators

from .batch import Estimate, LossOutput, RolloutBatch


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
        """input_ids/positions (B, L), mask (B, 1, L, L) | None, index/targets (B, N) -> log p (B, N), entropy (B, N)."""
        ...


CAPABILITIES = frozenset({"samples", "bounds", "trajectory"})
"""What an estimator may declare: ``samples`` (n Monte-Carlo draws per sequence, the ``samples`` attribute,
split per draw by BGPO, set by DPO/VRPO), ``bounds`` (lower and upper bounds of log p, SPG), ``trajectory``
(replays the rollout's recorded step map, so the rollout must record it)."""


class Estimator:
    """Base class of likelihood estimators. Subclasses set ``name`` (by the decorator), ``forwards``
    (model forward passes per sequence) and ``capabilities`` (a subset of :data:`CAPABILITIES`), and
    implement :meth:`draw` and :meth:`estimate`."""

    name: ClassVar[str] = "base"
    forwards: ClassVar[int] = 1
    capabilities: ClassVar[frozenset[str]] = frozenset()

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
    estimator_args: dict[str, Any] = Field(default_factory=dict, description="options of the estimator")
    inner_steps: int = Field(1, ge=1, description="optimizer updates per rollout batch (PPO epochs x mini-batches)")
    resample_noise: bool = Field(False, description="draw fresh estimator noise for every inner step (d1 original)")
    noise_seed: int | None = Field(None, description="re-seed the estimator noise with this constant at every "
                                   "step (DARE's fixed seed 42 quirk); None: seeded by run seed and step")
    count_padding: bool = Field(False, description="count the tail after the first EOS in likelihoods and means "
                                "(DARE for LLaDA/Dream); the papers mask it")


class Algorithm:
    """Base class of training algorithms. Subclasses set ``needs`` and ``Config``, implement :meth:`loss`,
    and usually :meth:`advantages`."""

    name: ClassVar[str] = "base"
    needs: ClassVar[Needs] = Needs()
    Config: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    default_estimator: ClassVar[dict[str, str]] = {}
    """Estimator per model attention kind when the config says ``auto``."""

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

    def bind(self, attention: str) -> Estimator:
        """Build the estimator for a model whose attention kind is ``attention``."""
        need = self.needs.attention
        if need and need != attention:
            raise ConfigError(f"algorithm {self.name!r} needs a {need.replace('_', '-')} model, "
                              f"this checkpoint is {attention.replace('_', '-')}; pick another --algo or model")
        name = self.config.estimator
        if name == "auto":
            name = self.default_estimator.get(attention) or next(iter(self.default_estimator.values()), "")
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

    def rollout_decoding(self, decoding, arch) -> dict[str, Any]:
        """DecodingConfig overrides this algorithm's rollouts add to the evaluation ``decoding`` (CJ-GRPO's step
        schedule); ``arch`` is the model's architecture entry. The user's ``rollout_decoding`` still wins."""
        return {}

    def check_rollout(self, decoding) -> None:
        """Refuse final rollout settings (the user's overrides applied) that this algorithm's likelihood
        cannot score, with a ConfigError naming the fix. Default: accept all."""

    def prepare(self, policy: Policy, batch: RolloutBatch, scorer) -> None:
        """Work after the rewards and before the estimator's draws that needs the policy or the verifiers;
        ``scorer(rows (N,), completions (N, T)) -> rewards (N,)`` grades any completions of batch rows with
        the step's verifiers (MDPO's rewards of intermediate predictions). Default: nothing."""

    def advantages(self, batch: RolloutBatch) -> torch.Tensor | None:
        """Per-sequence advantages (B,), or None for supervised objectives."""
        return None

    def loss(self, policy: Policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        raise NotImplementedError

    def loss_terms(self, policy, batch: RolloutBatch, inner_step: int) -> Iterator[LossOutput]:
        """The loss as terms the trainer backpropagates one at a time, each graph freed before the next is
        built (BGPO: one per Monte-Carlo sample, so memory is constant in their number). The terms share the
        micro-batch ``weight``, their losses sum to :meth:`loss`'s, and the last carries the metrics.
        Default: the whole loss as one term."""
        yield self.loss(policy, batch, inner_step)


def build_estimator(name: str, options: dict[str, Any]) -> Estimator:
    cls = estimators.get(name)
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
    return cls(config)


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
        estimators.register(name, cls, aliases=aliases)
        return cls

    return register
