"""The likelihood capability of the torch engines (:class:`~dare.harness.likelihood.LikelihoodEngine`).

An engine resolves an estimator for its model's decoding family from ``registry.likelihoods`` (a family it
does not serve is refused in one line), encodes and plans every request before any forward (so bad input
stops the run before work), scores all their rows in shared forward batches and reduces each request's own.
The length limit is the estimator's ``max_length`` capped at the model's (config.json
``max_sequence_length`` / ``max_position_embeddings``); context tokens beyond it are dropped on the left
and counted in ``LikelihoodResult.truncated``. A chat request's context is rendered first, as the user turn of
the model's chat template with its generation prompt (the text a decoder's prompt is built from), so the
continuation is scored as the start of the assistant's answer.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import torch

from dare.backends.models.tokenizer import render_prompt
from dare.harness.errors import ConfigError, InputError
from dare.harness.likelihood import EstimatorInfo, LikelihoodRequest, LikelihoodResult
from dare.harness.options import parse_options
from dare.harness.registry import likelihoods

from . import DEFAULTS
from .base import ScoringEstimator
from .forward import score_rows
from .masked import greedy_matches

log = logging.getLogger(__name__)
#: requests planned and scored together: bounds the rows held in memory (a result does not depend on it)
REQUESTS_PER_PASS = 64


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
            served = [n for n in likelihoods.names() if family in likelihoods.get(n).families]
            raise ConfigError(f"likelihood estimator {name!r} does not serve {self.arch.name} models; use "
                              f"{' or '.join(repr(n) for n in served)} (or leave the estimator unset)")
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

    def _rendered(self, request: LikelihoodRequest) -> LikelihoodRequest:
        """``request`` with its context as the chat template renders it as a user turn."""
        if not self._use_template():
            raise ConfigError(f"model {self.ctx.model_name} has no chat template to put contexts in; drop "
                              "choice.chat_template (its contexts are raw text)")
        text = render_prompt(self.model.tokenizer, [{"role": "user", "content": request.context}], True)
        return replace(request, context=text, chat=False)

    def _estimator(self, info: EstimatorInfo) -> ScoringEstimator:
        if isinstance(info.spec, ScoringEstimator):
            return info.spec
        return self.likelihood_estimator(info.name, info.options.model_dump()).spec

    def _score(self, requests: list[LikelihoodRequest], estimator: ScoringEstimator) -> list[LikelihoodResult]:
        if not requests:
            return []
        model = self.model
        limit = min(filter(None, (estimator.max_length, model_length(model.config))))
        if any(r.chat for r in requests):
            requests = [self._rendered(r) if r.chat else r for r in requests]
        encoded = [estimator.encode(model.tokenizer, r, model.eos_id, limit) for r in requests]  # all, before work
        results = []
        for lo in range(0, len(requests), REQUESTS_PER_PASS):
            part, batch = encoded[lo:lo + REQUESTS_PER_PASS], requests[lo:lo + REQUESTS_PER_PASS]
            plans = [estimator.plan(e, torch.Generator().manual_seed(r.seed), model.mask_id)
                     for e, r in zip(part, batch)]
            nlls = score_rows(model, plans, estimator.cfg)
            greedy = greedy_matches(model, part, estimator.cfg) if estimator.checks_greedy else [False] * len(part)
            for enc, plan, nll, is_greedy in zip(part, plans, nlls, greedy):
                logprob, stderr = estimator.reduce(enc, plan, nll)
                results.append(LikelihoodResult(logprob=logprob, stderr=stderr, is_greedy=is_greedy,
                                                tokens=len(enc.target), truncated=enc.truncated))
        log.debug("scored %d requests with %s", len(requests), estimator.name)
        return results
