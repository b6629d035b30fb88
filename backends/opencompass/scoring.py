"""OpenCompass's likelihood calls on a DARE engine: ``get_ppl`` (PPLInferencer) and ``get_loglikelihood``
(LLInferencer), from the engine's scoring estimators (harness/likelihood.py).

OpenCompass's HuggingFace model returns, per input, the mean next-token NLL of the text (lower is better) and,
per (input, continuation), log p(continuation | the input without it). A diffusion model has no left-to-right
NLL; here a text's score is its whole-text estimate (``loglikelihood_rolling``) over its token count, and a
continuation's is the estimator's ``log p(continuation | context)`` with the context the input less the
continuation at its end. Each request's seed is that of its text's content, so a score does not depend on what
else OpenCompass batched with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dare.harness.engine import request_seed
from dare.harness.errors import ConfigError, InputError
from dare.harness.likelihood import EstimatorInfo, LikelihoodRequest
from dare.harness.options import capabilities
from dare.harness.records import sha256_text


def estimator(engine: Any, name: str | None, options: dict[str, Any] | None) -> EstimatorInfo:
    """The engine's scoring estimator (the family's when ``name`` is None), or one line where it has none."""
    if not capabilities(engine).likelihood:
        raise ConfigError(f"engine {engine.name} scores no likelihood (it declares no estimator); PPL and "
                          "loglikelihood datasets need engine='torch'")
    return engine.likelihood_estimator(name, dict(options or {}))


def _request(context: str, continuation: str, seed: int) -> LikelihoodRequest:
    request_id = "oc-" + sha256_text(f"{context}\x1f{continuation}")[:16]
    return LikelihoodRequest(request_id, context, continuation, request_seed(seed, request_id, 0))


def perplexities(engine: Any, info: EstimatorInfo, inputs: Sequence[str], mask_length: Any, seed: int) -> list[float]:
    """Per input, minus its whole-text log-likelihood estimate over its tokens (nats per token)."""
    if mask_length is not None:
        raise ConfigError("get_ppl with mask_length (PPLInferencer's normalizing_str) is not served by DARE's "
                          "estimators; drop normalizing_str from the dataset's inferencer")
    results = engine.loglikelihood_rolling([_request("", text, seed) for text in inputs], info)
    return [-r.logprob / max(r.tokens, 1) for r in results]


def loglikelihoods(engine: Any, info: EstimatorInfo, inputs: Sequence[str], conts: Sequence[str],
                   seed: int) -> list[float]:
    """Per (input, continuation): log p(continuation | the input without it at its end)."""
    requests = []
    for text, cont in zip(inputs, conts):
        if not text.endswith(cont):
            raise InputError(f"loglikelihood input does not end with its continuation {cont[:40]!r}")
        requests.append(_request(text[:len(text) - len(cont)], cont, seed))
    return [r.logprob for r in engine.loglikelihood(requests, info)]
