"""LLaDA's likelihood (ML-GSAI/LLaDA@b7e6c35, eval_llada.py, ``LLaDAEvalHarness.get_loglikelihood``), row for row.

``llada_mc``: ``mc_num / batch`` iterations of ``batch`` rows of prefix + target. Each iteration draws ONE
k ~ randint(1, T) (T target tokens), gives its rows the stratified mask counts
``x = round(linspace(k, k + (batch - 1) T / batch, batch))`` wrapped to 1..T, and masks each row's first
x_i target positions under its own ``randperm(T)``; the loss is the masked tokens' cross-entropy over
p_mask = x_i / T, summed and divided by ``batch``; the estimate is minus the mean over iterations (a
Monte-Carlo ELBO of log p(target | prefix)). RNG order: randint, then one randperm per row, iteration by
iteration, from the request's own CPU generator (so a GPU run draws what a CPU run draws).
``cfg > 0`` scores ``un + (cfg + 1)(cond - un)`` with the prompt masked in ``un`` (their ``get_logits``).
``check_greedy``: their ``suffix_greedy_prediction`` (the target decoded from all-mask, one token per step,
highest confidence first; is it the target?), off by default as their docstring recommends.
The stderr is over iterations. A whole text (empty context) is the same ELBO with no prefix.
"""

from __future__ import annotations

import torch
from pydantic import Field, ValidationInfo, field_validator

from dare.harness.options import Options

from .base import Encoded, RowPlan, ScoringEstimator, iteration_losses, mean_and_stderr, scoring_estimator, sequence
from .forward import logits_at, pad_rows


class LladaOptions(Options):
    """``mc_num`` Monte-Carlo rows, ``batch`` rows per stratified iteration (mc_num divisible by batch),
    ``cfg`` guidance scale, ``check_greedy`` (lm-eval's is_greedy), ``max_length`` (their 4096, capped at the
    model's length). Defaults are LLaDAEvalHarness's, except check_greedy (their recommended False)."""

    mc_num: int = Field(128, ge=1)
    batch: int = Field(32, ge=1)
    cfg: float = Field(0.0, ge=0.0)
    check_greedy: bool = False
    max_length: int = Field(4096, ge=2)

    @field_validator("batch")
    @classmethod
    def _divides(cls, batch: int, info: ValidationInfo) -> int:
        mc_num = info.data.get("mc_num", batch)
        if mc_num % batch:
            raise ValueError(f"mc_num={mc_num} is not a multiple of batch={batch}; choose a batch that divides "
                             "mc_num (the authors assert it)")
        return batch


@scoring_estimator
class LladaMC(ScoringEstimator):
    name = "llada_mc"
    Options = LladaOptions
    families = frozenset({"mdm"})
    rolling = True

    @property
    def cfg(self) -> float:
        return self.options.cfg

    @property
    def checks_greedy(self) -> bool:
        return self.options.check_greedy

    def plan(self, enc: Encoded, gen: torch.Generator, mask_id: int) -> RowPlan:
        """mc_num rows (L = prefix + target wide) with the authors' draws; state p_mask (R, L) float32."""
        seq, p, t = sequence(enc), len(enc.prefix), len(enc.target)
        b, length = self.options.batch, p + t
        rows, p_mask = [], []
        for _ in range(self.options.mc_num // b):
            k = torch.randint(1, t + 1, (), generator=gen)
            x = torch.round(torch.linspace(float(k), k + (b - 1) * (t / b), steps=b)).long()
            x = ((x - 1) % t) + 1
            is_mask = torch.arange(t).repeat(b, 1) < x.unsqueeze(1)
            for i in range(b):
                is_mask[i] = is_mask[i][torch.randperm(t, generator=gen)]
            rows.append(torch.cat([torch.zeros(b, p, dtype=torch.bool), is_mask], dim=1))
            p_mask.append((x / t).unsqueeze(1).repeat(1, length))
        scored = torch.cat(rows)
        targets = seq.repeat(scored.shape[0], 1)
        prompt = torch.arange(length) < p
        return RowPlan(targets.masked_fill(scored, mask_id), targets, scored, torch.arange(length), prompt=prompt,
                       state={"p_mask": torch.cat(p_mask)})

    def reduce(self, enc: Encoded, plan: RowPlan, nll: torch.Tensor) -> tuple[float, float]:
        losses = iteration_losses(nll, plan.scored, plan.state["p_mask"], self.options.batch)
        mean, stderr = mean_and_stderr(losses)
        return -mean, stderr


def greedy_matches(model, encoded: list[Encoded], cfg: float) -> list[bool]:
    """LLaDA's ``suffix_greedy_prediction`` for every request at once: from the prefix and an all-mask target,
    each step commits the masked position whose argmax token has the highest probability (float32 softmax);
    after T steps, is the canvas the target? One row per request per step; finished requests drop out."""
    canvases = [torch.tensor(e.prefix + [model.mask_id] * len(e.target)) for e in encoded]
    for step in range(max(len(e.target) for e in encoded)):
        live = [i for i, e in enumerate(encoded) if step < len(e.target)]
        plans = []
        for i in live:
            seq, width = canvases[i], len(canvases[i])
            masked = seq == model.mask_id
            plans.append(RowPlan(seq[None], seq[None], masked[None], torch.arange(width),
                                 prompt=torch.arange(width) < len(encoded[i].prefix)))
        tokens, _, scored, positions, prompt, attention = pad_rows([(plan, 0) for plan in plans], model.pad_id)
        with torch.inference_mode():
            logits = logits_at(model, tokens, positions, attention, scored, cfg, prompt).cpu()
        offset = 0
        for i, plan in zip(live, plans):
            n = int(plan.scored.sum())
            part = logits[offset:offset + n]
            offset += n
            x0 = part.argmax(-1)
            confidence = torch.softmax(part, -1).gather(-1, x0[:, None])[:, 0]
            where = plan.scored[0].nonzero()[:, 0][confidence.argmax()]
            canvases[i][where] = x0[confidence.argmax()]
    return [canvases[i][len(e.prefix):].tolist() == e.target for i, e in enumerate(encoded)]
