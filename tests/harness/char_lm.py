"""A character-count language model that scores likelihood, for the choice-benchmark tests.

``log p(continuation | context) = -len(continuation) * ln 2`` (each character one fair coin): simple enough
that every verdict is worked by hand. Its estimators are registered in ``registry.likelihoods``:
``exact`` gives that value with stderr 0; ``noisy`` adds a Monte-Carlo-like error from the request's own
seed, ``N(0, 1) / sqrt(mc_num)`` plus ``cfg`` (so ``mc_num`` and ``cfg`` change the scores and must key the
cache), with ``stderr = 1 / sqrt(mc_num)``; ``fail_after`` (execution only) raises after that many batches,
as a killed run would stop.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from dare.harness.engine import EngineBase
from dare.harness.errors import ConfigError
from dare.harness.likelihood import EstimatorInfo, LikelihoodRequest, LikelihoodResult
from dare.harness.options import Capabilities, NoOptions, Options, parse_options
from dare.harness.records import ModelInfo
from dare.harness.registry import engines, likelihoods


class NoisyOptions(Options):
    mc_num: int = 1
    cfg: float = 0.0
    fail_after: int | None = None
    execution_only = frozenset({"fail_after"})


@dataclass(frozen=True)
class CharEstimator:
    name: str
    Options: type[Options]
    exact: bool


EXACT = CharEstimator("exact", NoOptions, True)
NOISY = CharEstimator("noisy", NoisyOptions, False)


class Interrupted(Exception):
    """The stand-in for a kill: the run stops mid-benchmark."""


class CharLM(EngineBase):
    name = "char-lm"
    version = "1"
    capabilities = Capabilities(needs_checkpoint=False, likelihood=True)
    batches = 0  # batches scored by this process (the resume test reads it)

    def model_info(self) -> ModelInfo:
        return ModelInfo(name=self.ctx.model_name, fingerprint="char-lm-1")

    def prepare(self, requests, decoding) -> None:
        pass

    def generate(self, requests, decoding):
        raise ConfigError("char-lm only scores likelihood")

    def likelihood_estimator(self, name, options) -> EstimatorInfo:
        spec = likelihoods.get(name or "exact")
        return EstimatorInfo(spec.name, "1", parse_options(spec.Options, options, "likelihood"), spec.exact, spec)

    def loglikelihood(self, requests: list[LikelihoodRequest], estimator: EstimatorInfo) -> list[LikelihoodResult]:
        opts = estimator.options
        if getattr(opts, "fail_after", None) is not None and CharLM.batches >= opts.fail_after:
            raise Interrupted(f"stopped after {CharLM.batches} batches")
        CharLM.batches += 1
        out = []
        for r in requests:
            exact = -len(r.continuation) * math.log(2)
            if estimator.exact:
                out.append(LikelihoodResult(exact, 0.0, False, len(r.continuation)))
                continue
            noise = random.Random(r.seed).gauss(0.0, 1.0) / math.sqrt(opts.mc_num)
            out.append(LikelihoodResult(exact + noise + opts.cfg, 1 / math.sqrt(opts.mc_num), False,
                                        len(r.continuation)))
        return out

    def loglikelihood_rolling(self, requests, estimator):
        return self.loglikelihood(requests, estimator)


def register() -> None:
    """Register the engine and its estimators (tests snapshot and restore the registries around it)."""
    engines.register("char-lm", CharLM)
    likelihoods.register("exact", EXACT)
    likelihoods.register("noisy", NOISY)
