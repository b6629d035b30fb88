"""What every scoring estimator is: encode a request, plan its rows, reduce their token losses.

An estimator turns one encoded request into a :class:`RowPlan` (the rows it needs, noised with draws from
that request's own generator, before any forward), the engine runs every request's rows through the network
in shared forward batches (:mod:`.forward`), and the estimator reduces the per-token losses of its own rows.
Since the draws are per request and a row's logits do not depend on the rows beside it, a result never
depends on what else was scored with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from dare.harness.errors import InputError
from dare.harness.likelihood import LikelihoodRequest
from dare.harness.options import Options
from dare.harness.registry import likelihoods


@dataclass(frozen=True)
class Encoded:
    """A request's token ids: ``prefix`` (context, after left truncation), ``target`` (continuation; Dream's
    includes its EOS), ``truncated`` (context tokens dropped on the left to fit the length limit)."""

    prefix: list[int]
    target: list[int]
    truncated: int = 0
    request_id: str = ""


@dataclass
class RowPlan:
    """R rows over a layout of width W for one request.

    tokens (R, W) long: the model's input (mask ids where noised); targets (R, W) long: the token each scored
    position must predict; scored (R, W) bool; positions (W,) long; attention (W, W) bool (True = may attend)
    or None for full attention; prompt (W,) bool: what classifier-free guidance masks in its unconditional
    copy (None: no guidance); state: what :meth:`ScoringEstimator.reduce` reads (noise levels, weights)."""

    tokens: torch.Tensor
    targets: torch.Tensor
    scored: torch.Tensor
    positions: torch.Tensor
    attention: torch.Tensor | None = None
    prompt: torch.Tensor | None = None
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return self.tokens.shape[0]

    @property
    def width(self) -> int:
        return self.tokens.shape[1]


class ScoringEstimator:
    """Base of a registered estimator. ``families``: the decoding families it serves; ``rolling``: whether a
    whole text (empty context) has a meaningful estimate; ``default_max_length``: the authors' length limit;
    ``cfg``: the guidance scale its rows are scored with (LLaDA's ``un + (cfg + 1)(cond - un)``)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    Options: ClassVar[type[Options]]
    families: ClassVar[frozenset[str]]
    rolling: ClassVar[bool] = False
    append_eos: ClassVar[bool] = False

    def __init__(self, options: Options, arch=None):
        self.options = options
        self.arch = arch  # the model's Architecture (block size), or None

    @property
    def exact(self) -> bool:
        return False

    @property
    def cfg(self) -> float:
        return 0.0

    @property
    def checks_greedy(self) -> bool:
        """Whether results carry lm-eval's is_greedy (LLaDA's ``suffix_greedy_prediction``)."""
        return False

    @property
    def max_length(self) -> int:
        return self.options.max_length

    def encode(self, tokenizer, request: LikelihoodRequest, eos_id: int, limit: int) -> Encoded:
        """The authors' ``_encode_pair`` (trailing context spaces move to the continuation; the continuation is
        ``enc(context + continuation)[len(enc(context)):]``, Dream's with EOS appended), then DARE's length rule:
        context tokens dropped on the left until prefix + target fit ``limit``; a target that alone does not
        fit is refused (Dream's code would cut the continuation itself)."""
        context, continuation = request.context, request.continuation
        if not continuation:
            raise InputError(f"likelihood request {request.request_id!r}: the continuation is empty; "
                             "give each request at least one token to score")
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        whole = tokenizer(context + continuation)["input_ids"] + ([eos_id] if self.append_eos else [])
        prefix = tokenizer(context)["input_ids"]
        target = whole[len(prefix):]
        if len(target) <= int(self.append_eos):
            raise InputError(f"likelihood request {request.request_id!r}: the continuation "
                             f"{request.continuation!r} tokenises to nothing; give at least one token to score")
        if len(target) > limit:
            raise InputError(f"likelihood request {request.request_id!r}: the continuation has {len(target)} tokens, "
                             f"more than the length limit {limit}; shorten it or raise likelihood.max_length")
        dropped = max(0, len(prefix) + len(target) - limit)
        return Encoded(prefix[dropped:], target, dropped, request.request_id)

    def plan(self, enc: Encoded, gen: torch.Generator, mask_id: int) -> RowPlan:
        raise NotImplementedError

    def reduce(self, enc: Encoded, plan: RowPlan, nll: torch.Tensor) -> tuple[float, float]:
        """(log-likelihood estimate, its Monte-Carlo standard error) from ``nll`` (R, W) float32: each scored
        position's cross-entropy, 0 elsewhere."""
        raise NotImplementedError


def scoring_estimator(cls: type[ScoringEstimator]) -> type[ScoringEstimator]:
    """Class decorator: register ``cls`` in ``registry.likelihoods`` under ``cls.name``."""
    likelihoods.register(cls.name, cls)
    return cls


def sequence(enc: Encoded) -> torch.Tensor:
    """prefix + target as one (L,) long tensor."""
    return torch.tensor(enc.prefix + enc.target, dtype=torch.long)


def iteration_losses(nll: torch.Tensor, scored: torch.Tensor, p_mask: torch.Tensor, batch: int) -> list[float]:
    """The authors' per-iteration loss: for each group of ``batch`` rows, ``(ce[masked] / p_mask[masked]).sum()
    / batch`` in float32, read as a Python float (``loss.item()``): nll, scored, p_mask (R, W)."""
    return [((nll[r:r + batch][scored[r:r + batch]] / p_mask[r:r + batch][scored[r:r + batch]]).sum() / batch).item()
            for r in range(0, nll.shape[0], batch)]


def mean_and_stderr(values: list[float]) -> tuple[float, float]:
    """Python mean (``sum / len``, the authors' order) and the standard error over the values (0.0 for one)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var / len(values))
