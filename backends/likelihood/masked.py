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
from pydantic import Field

from .base import Encoded, IterationOptions, RowPlan, ScoringEstimator, iteration_estimate, scoring_estimator, sequence
from .forward import logits_at, tokens_per_forward, width_groups


class LladaOptions(IterationOptions):
    """``mc_num`` Monte-Carlo rows, ``batch`` rows per stratified iteration (mc_num divisible by batch),
    ``cfg`` guidance scale, ``check_greedy`` (lm-eval's is_greedy), ``max_length`` (their 4096, capped at the
    model's length). Defaults are LLaDAEvalHarness's, except check_greedy (their recommended False)."""

    batch: int = Field(32, ge=1)
    cfg: float = Field(0.0, ge=0.0)
    check_greedy: bool = False
    max_length: int = Field(4096, ge=2)


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
        return iteration_estimate(nll, plan, self.options.batch)


def greedy_matches(model, encoded: list[Encoded], cfg: float) -> list[bool]:
    """LLaDA's ``suffix_greedy_prediction`` for every request at once: from the prefix and an all-mask target,
    each step commits the masked position whose argmax token has the highest probability (float32 softmax);
    after T steps, is the canvas the target? A committed token never changes, so a request whose commit is not
    its target's token is settled False there and takes no more steps (a wrong choice usually at its first).
    The decode depends only on the prefix and T, so requests that share both (one question's equal-length
    answers) share one canvas, which runs while any of them is unsettled. Canvases of equal width share a
    forward unpadded, so an answer is the same alone or beside any others."""
    first: dict[tuple[tuple[int, ...], int], int] = {}
    owner = [first.setdefault((tuple(e.prefix), len(e.target)), i) for i, e in enumerate(encoded)]
    sharers: dict[int, list[int]] = {}
    for i, o in enumerate(owner):
        sharers.setdefault(o, []).append(i)
    canvases = {i: torch.tensor(encoded[i].prefix + [model.mask_id] * len(encoded[i].target)) for i in sharers}
    widths, budget = {i: len(c) for i, c in canvases.items()}, tokens_per_forward(model, cfg)
    failed: set[int] = set()
    for step in range(max(len(e.target) for e in encoded)):
        live = sorted((i for i in sharers if step < len(encoded[i].target) and not failed.issuperset(sharers[i])),
                      key=widths.__getitem__)
        for group in width_groups(live, widths.__getitem__, budget):
            tokens = torch.stack([canvases[i] for i in group])  # (B, W)
            width = tokens.shape[1]
            scored = tokens == model.mask_id
            prompt = torch.arange(width)[None] < torch.tensor([len(encoded[i].prefix) for i in group])[:, None]
            with torch.inference_mode():
                logits = logits_at(model, tokens, torch.arange(width).repeat(len(group), 1), None, scored, cfg,
                                   prompt).cpu()
            for i, part, where in zip(group, logits.split(scored.sum(1).tolist()), scored):
                x0 = part.argmax(-1)
                best = torch.softmax(part, -1).gather(-1, x0[:, None])[:, 0].argmax()
                position, token = int(where.nonzero()[best, 0]), int(x0[best])
                canvases[i][position] = token
                failed.update(j for j in sharers[i] if token != model.mask_id
                              and token != encoded[j].target[position - len(encoded[j].prefix)])
    return [j not in failed and canvases[owner[j]][len(e.prefix):].tolist() == e.target for j, e in enumerate(encoded)]
