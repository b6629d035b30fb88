"""Likelihood as a declared capability of an engine: ``log p(continuation | context)`` for scoring.

Half of a dLLM paper's table is scored by likelihood, not by generation (multiple choice: ARC, HellaSwag,
MMLU, ...). A diffusion model has no exact left-to-right likelihood, so each family estimates it the way its
authors do (a Monte-Carlo ELBO over masked copies, a deterministic chain, a block factorisation); the
estimators are registered plugins with typed options (``registry.likelihoods``), chosen per run, recorded in
run.json and keyed into the caches, like decoders.

This module is the harness side of the contract: the request and result records and what an engine declares.
Backends implement it; callers (the choice-task runner, the lm-eval and inspect adapters, OpenCompass's PPL
path) use only what is here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .options import NoOptions, Options
from .records import ComponentInfo, sha256_text


@dataclass(frozen=True)
class LikelihoodRequest:
    """One continuation to score: ``context`` (few-shot text, question; already templated) then
    ``continuation``. ``seed`` is the request's own (``engine.request_seed(run_seed, request_id, 0)``), so a
    Monte-Carlo estimate never depends on what else shares its forward batch."""

    request_id: str
    context: str
    continuation: str
    seed: int
    chat: bool = False
    """The context is a user turn: the engine renders it through the model's chat template with the generation
    prompt, and the continuation follows that (lm-eval's ``--apply_chat_template``)."""

    @property
    def key(self) -> str:
        """Content key of the request (the cache keys it beside the estimator's identity)."""
        chat = "\x1fchat" if self.chat else ""  # a raw request keeps the key it had before chat requests existed
        return sha256_text(f"{self.context}\x1f{self.continuation}\x1f{self.seed}{chat}")[:24]


@dataclass(frozen=True)
class LikelihoodResult:
    """``logprob``: the estimate of ``log p(continuation | context)`` in nats; ``stderr``: its Monte-Carlo
    standard error (0.0 where the estimator is exact, and where one Monte-Carlo iteration leaves no spread);
    ``is_greedy``: lm-eval's field (whether greedy decoding from the context reproduces the continuation; False
    where the estimator was not asked to check); ``tokens``: continuation length in tokens (Dream's EOS
    included); ``truncated``: context tokens dropped on the left to fit the length limit (the estimator's
    ``max_length`` capped at the model's)."""

    logprob: float
    stderr: float = 0.0
    is_greedy: bool = False
    tokens: int = 0
    truncated: int = 0


@dataclass(frozen=True)
class EstimatorInfo:
    """An estimator as chosen for one run: its registry name and version, its validated options and the
    engine's own declaration (opaque to the harness, handed back to ``loglikelihood``)."""

    name: str
    version: str
    options: Options = field(default_factory=NoOptions)
    exact: bool = False
    """True where the estimate equals the likelihood (no sampling): ``stderr`` is then 0."""
    spec: Any = field(default=None, compare=False)

    def component(self) -> ComponentInfo:
        """What run.json records (and the cache and the leaderboard's comparability key read)."""
        return ComponentInfo(name=self.name, version=self.version, options=self.options.model_dump(mode="json"))

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "options": self.options.identity()}


@runtime_checkable
class LikelihoodEngine(Protocol):
    """What an engine that declares ``capabilities.likelihood`` provides."""

    def likelihood_estimator(self, name: str | None, options: dict[str, Any]) -> EstimatorInfo:
        """Resolve and validate an estimator for this engine's model (``name`` None: the family's default);
        a family that cannot serve it raises a one-line :class:`~dare.harness.errors.ConfigError`."""
        ...

    def loglikelihood(self, requests: list[LikelihoodRequest], estimator: EstimatorInfo) -> list[LikelihoodResult]:
        """Results for ``requests``, in order; each independent of the batch it was computed in."""
        ...

    def loglikelihood_rolling(self, requests: list[LikelihoodRequest],
                              estimator: EstimatorInfo) -> list[LikelihoodResult]:
        """The whole text's log-likelihood (``context`` empty, the text in ``continuation``), or a one-line
        :class:`~dare.harness.errors.ConfigError` where the family has no such estimate."""
        ...
