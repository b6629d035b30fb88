"""Dream's likelihoods (DreamLM/Dream@fac0a7f, eval/eval.py, class ``Dream``), row for row.

Both score prefix + target where the target ends with the EOS id (their ``_encode_pair``) and the model's
logits are shifted (token i is read from the output at i - 1; position 0 from itself).

``dream_mc`` (their ``_eval_target_nll_mc``): ``mc_num / batch`` iterations; each draws one u0 ~ U[0, 1),
gives row i the level t_i = (u0 + i / batch) mod 1 and p_mask = (1 - eps) t + eps, then masks each position
with probability p_mask (one ``rand(batch, L)``), never the first or last position. ``log_type`` picks what
keeps that noise: ``ftb`` the target (log p(target | prefix)), ``btf`` the prefix (log p(prefix | target)),
``union`` both (the result divided by the total length). The loss is the masked tokens' cross-entropy over
p_mask, summed, over ``batch``; the estimate is minus the mean over iterations. RNG order: rand(1), then
rand(batch, L), iteration by iteration, from the request's own CPU generator.

``dream_ar`` (their ``_eval_target_nll_ar``): deterministic, one row per token of the scored part (the target
for ``log_type=ftb``, the prefix for ``btf``); ``direction=ftb`` (their ``nll_type=ar_ftb``) masks row i's
tokens i.. (left to right), ``btf`` (``ar_btf``) tokens ..i (right to left); row i scores token i.

Classifier-free guidance: their ``get_logits`` tests ``classifier_free_guidance > 1`` but then reads
``self.cfg``, which the class never sets, so any guidance raises there and every published Dream number is
unguided. DARE has no guidance option for Dream: what it would compute is not the authors' (an unknown
option is refused). A whole text has no estimate here: the first token is never masked (their BOS rule), so
``loglikelihood_rolling`` is refused.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, ValidationInfo, field_validator

from dare.harness.options import Options

from .base import Encoded, RowPlan, ScoringEstimator, iteration_losses, mean_and_stderr, scoring_estimator, sequence


class DreamMCOptions(Options):
    """``mc_num`` rows, ``batch`` rows per stratified iteration (mc_num divisible by batch), ``log_type``,
    ``sampling_eps`` and ``max_length``: the ``Dream`` class's defaults (its lm-eval batch_size is 1)."""

    mc_num: int = Field(128, ge=1)
    batch: int = Field(1, ge=1)
    log_type: Literal["ftb", "btf", "union"] = "ftb"
    sampling_eps: float = Field(1e-3, ge=0.0, lt=1.0)
    max_length: int = Field(2048, ge=2)

    @field_validator("batch")
    @classmethod
    def _divides(cls, batch: int, info: ValidationInfo) -> int:
        mc_num = info.data.get("mc_num", batch)
        if mc_num % batch:
            raise ValueError(f"mc_num={mc_num} is not a multiple of batch={batch}; choose a batch that divides "
                             "mc_num (Dream's code would silently run mc_num // batch iterations)")
        return batch


class DreamAROptions(Options):
    """``direction``: ftb (left to right, ``nll_type=ar_ftb``) or btf (``ar_btf``); ``log_type``: which part is
    scored (ftb: the target given the prefix, btf: the prefix given the target); ``max_length``."""

    direction: Literal["ftb", "btf"] = "ftb"
    log_type: Literal["ftb", "btf"] = "ftb"
    max_length: int = Field(2048, ge=2)


class _Dream(ScoringEstimator):
    families = frozenset({"dream"})
    append_eos = True


@scoring_estimator
class DreamMC(_Dream):
    name = "dream_mc"
    Options = DreamMCOptions

    def plan(self, enc: Encoded, gen: torch.Generator, mask_id: int) -> RowPlan:
        """mc_num rows (L wide); state p_mask (R, L) float32."""
        seq, p = sequence(enc), len(enc.prefix)
        b, length, eps = self.options.batch, len(seq), self.options.sampling_eps
        keep = {"ftb": torch.arange(length) >= p, "btf": torch.arange(length) < p,
                "union": torch.ones(length, dtype=torch.bool)}[self.options.log_type]
        masks, levels = [], []
        for _ in range(self.options.mc_num // b):
            u0 = torch.rand(1, generator=gen, dtype=torch.float32)
            t = (u0 + torch.arange(b).float() / b) % 1
            p_mask = ((1 - eps) * t + eps)[:, None].repeat(1, length)
            masked = torch.rand((b, length), generator=gen) < p_mask
            masked[:, 0] = False
            masked[:, -1] = False
            masks.append(masked & keep)
            levels.append(p_mask)
        scored = torch.cat(masks)
        targets = seq.repeat(scored.shape[0], 1)
        return RowPlan(targets.masked_fill(scored, mask_id), targets, scored, torch.arange(length),
                       state={"p_mask": torch.cat(levels)})

    def reduce(self, enc: Encoded, plan: RowPlan, nll: torch.Tensor) -> tuple[float, float]:
        losses = iteration_losses(nll, plan.scored, plan.state["p_mask"], self.options.batch)
        mean, stderr = mean_and_stderr(losses)
        if self.options.log_type == "union":
            total = len(enc.prefix) + len(enc.target)
            return -mean / total, stderr / total
        return -mean, stderr


@scoring_estimator
class DreamAR(_Dream):
    name = "dream_ar"
    Options = DreamAROptions

    @property
    def exact(self) -> bool:
        return True

    def plan(self, enc: Encoded, gen: torch.Generator, mask_id: int) -> RowPlan:
        """One row per scored token; row i scores token i of the scored part with the chain's mask."""
        seq, p = sequence(enc), len(enc.prefix)
        span = slice(p, len(seq)) if self.options.log_type == "ftb" else slice(0, p)
        n = span.stop - span.start
        square = torch.ones(n, n, dtype=torch.bool)
        hidden = torch.triu(square) if self.options.direction == "ftb" else torch.tril(square)
        masked = torch.zeros(n, len(seq), dtype=torch.bool)
        masked[:, span] = hidden
        scored = torch.zeros_like(masked)
        scored[:, span] = torch.eye(n, dtype=torch.bool)
        targets = seq.repeat(n, 1)
        return RowPlan(targets.masked_fill(masked, mask_id), targets, scored, torch.arange(len(seq)))

    def reduce(self, enc: Encoded, plan: RowPlan, nll: torch.Tensor) -> tuple[float, float]:
        return -nll[plan.scored].sum().item(), 0.0
