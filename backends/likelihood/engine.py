"""The likelihood capability of the torch engines (:class:`~dare.harness.likelihood.LikelihoodEngine`).

An engine resolves an estimator for its model's decoding family from ``registry.likelihoods`` (a family it
does not serve is refused in one line), encodes and plans every request before any forward (so bad input
stops the run before work), scores all their rows in shared forward batches and reduces each request's own.
The length limit is the estimator's ``max_length`` capped at the model's (config.json
``max_sequence_length`` / ``max_position_embeddings``); context tokens beyond it are dropped on the left
and counted in ``LikelihoodResult.truncated``.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from dare.harness.errors import ConfigError, InputError
from dare.harness.likelihood import EstimatorInfo, LikelihoodRequest, LikelihoodResult
from dare.harness.options import parse_options
from dare.harness.registry import likelihoods

from . import DEFAULTS
from .base import ScoringEstimator
from .forward import score_rows
from .masked import greedy_matches

log = logging.getLogger(__name__)


def model_length(config: dict[str, Any]) -> int | None:
    """The longest sequence the checkpoint declares, or None."""
    return next((config[k] for k in ("max_sequence_length", "max_position_embeddings") if config.get(k)), None)


class LikelihoodMixin:
    """``likelihood_estimator``, ``loglikelihood`` and ``loglikelihood_rolling`` over ``self.model`` / ``self.arch``."""

    def likelihood_estimator(self, name: str | None, options: dict[str, Any]) -> EstimatorInfo:
        family = self.arch.decoding_family
        name = name or DEFAULTS.get(family)
        if name is None:
            raise ConfigError(f"{self.arch.name} models have no likelihood estimator; choose a masked, Dream or "
                              "block-diffusion model")
        cls = likelihoods.get(name)
        if family not in cls.families:
            raise ConfigError(f"likelihood estimator {name!r} does not serve {self.arch.name} models; use "
                              f"{DEFAULTS.get(family, 'none')!r} (or leave the estimator unset)")
        estimator = cls(parse_options(cls.Options, options, "likelihood"), self.arch)
        return EstimatorInfo(name=name, version=cls.version, options=estimator.options, exact=estimator.exact,
                             spec=estimator)

    def loglikelihood(self, requests: list[LikelihoodRequest], estimator: EstimatorInfo) -> list[LikelihoodResult]:
        return self._score(requests, self._estimator(estimator))

    def loglikelihood_rolling(self, requests: list[LikelihoodRequest],
                              estimator: EstimatorInfo) -> list[LikelihoodResult]:
        spec = self._estimator(estimator)
        if not spec.rolling:
            raise ConfigError(f"likelihood estimator {estimator.name!r} has no whole-text estimate (rolling "
                              "log-likelihood); score continuations with loglikelihood instead")
        with_context = [r.request_id for r in requests if r.context]
        if with_context:
            raise InputError(f"rolling likelihood request {with_context[0]!r} has a context; a whole text goes in "
                             "the continuation with an empty context")
        return self._score(requests, spec)

    def _estimator(self, info: EstimatorInfo) -> ScoringEstimator:
        if isinstance(info.spec, ScoringEstimator):
            return info.spec
        return self.likelihood_estimator(info.name, info.options.model_dump()).spec

    def _score(self, requests: list[LikelihoodRequest], estimator: ScoringEstimator) -> list[LikelihoodResult]:
        if not requests:
            return []
        model = self.model
        limit = min(filter(None, (estimator.max_length, model_length(model.config))))
        encoded = [estimator.encode(model.tokenizer, r, model.eos_id, limit) for r in requests]
        plans = [estimator.plan(e, torch.Generator().manual_seed(r.seed), model.mask_id)
                 for e, r in zip(encoded, requests)]
        nlls = score_rows(model, plans, estimator.cfg)
        greedy = (greedy_matches(model, encoded, estimator.cfg) if estimator.checks_greedy
                  else [False] * len(requests))
        results = []
        for enc, plan, nll, is_greedy in zip(encoded, plans, nlls, greedy):
            logprob, stderr = estimator.reduce(enc, plan, nll)
            results.append(LikelihoodResult(logprob=logprob, stderr=stderr, is_greedy=is_greedy,
                                            tokens=len(enc.target), truncated=enc.truncated))
        log.debug("scored %d requests with %s", len(requests), estimator.name)
        return results
