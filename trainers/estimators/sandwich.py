"""SPG's sandwich of log p(y | x) for masked diffusion (Wang et al. 2025, facebookresearch/SPG): ``sandwich``.

Masks (``masking``):

- ``block_random`` (the paper's default): the response is cut into blocks of ``block_length`` from its first
  token; each draw picks a block j among the blocks holding counted tokens (distinct blocks across draws as long
  as there are enough), masks every token after block j, m ~ U{max(1, floor(B_j min_t)) .. floor(B_j max_t)}
  random counted tokens of block j (B_j: its counted tokens) and, with probability ``prompt_mask_prob``, each
  real prompt token and each token before block j.
- ``random``: m ~ U{max(1, floor(L_v min_t)) .. floor(L_v max_t)} random counted tokens, the prompt as above.

Present tokens outside ``completion_mask`` are always masked. With t_j = (masked counted tokens) / L_v:

- lower bound (:meth:`Sandwich.estimate`): ELBO = mean_j sum_{i masked} log p_ij / t_j, i.e. L_v times SPG's
  per-token average;
- upper bound (:meth:`Sandwich.bounds`): EUBO = (1 / beta) sum_i log q_i, q_i = mean_j [1{i masked} p_ij^beta / t_j],
  rescaled to L_v / #{i: q_i > 0} when some tokens were never masked (SPG averages over those with q_i > 0).

With ``random`` masking the expectations are exact: E[ELBO] = E_order sum_i log p(y_i | y_before), which is log p(y)
for a model whose conditionals come from one joint (and below the any-order likelihood otherwise), and
EUBO >= log p(y) for such a model by Jensen, with equality when the conditionals ignore the context.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from ..api import Estimator, estimator
from ..batch import Estimate, RolloutBatch
from ..training.sequences import build_layout
from .masked import response_logp


def uniform_int(low: torch.Tensor, high: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Integers uniform on [low, high] elementwise (float64 tensors of the same shape)."""
    u = torch.rand(low.shape, generator=generator, dtype=torch.float64)
    return (low + (u * (high - low + 1)).floor()).clamp(max=high)


def random_rank(u: torch.Tensor, member: torch.Tensor) -> torch.Tensor:
    """Rank (B, n, T) of each ``u`` among the ``member`` tokens (B, n, T) of its row (members first)."""
    return u.masked_fill(~member, 2.0).argsort(-1).argsort(-1)


@estimator("sandwich")
class Sandwich(Estimator):
    """SPG: block-random masks; ``estimate`` is the lower bound, ``bounds`` gives lower and upper together."""

    forwards = 1
    capabilities = frozenset({"samples", "bounds"})

    def __init__(self, samples: int = 2, masking: Literal["block_random", "random"] = "block_random",
                 block_length: int = 32, min_t: float = 0.0, max_t: float = 1.0, prompt_mask_prob: float = 0.15):
        if samples < 1 or block_length < 1 or not 0 <= min_t <= max_t <= 1 or masking not in ("block_random", "random"):
            raise ValueError("need samples >= 1, block_length >= 1, 0 <= min_t <= max_t <= 1, "
                             "masking block_random or random")
        self.samples, self.masking, self.block_length = int(samples), masking, int(block_length)
        self.min_t, self.max_t, self.prompt_mask_prob = float(min_t), float(max_t), float(prompt_mask_prob)

    def _count_range(self, size: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        low = (size * self.min_t).floor().clamp(min=1)
        return low, torch.maximum((size * self.max_t).floor().clamp(max=size), low)

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """masked (B, n, T) bool, t (B, n) float64 (empirical masked share) and prompt_masked (B, n, P) bool."""
        b, length = batch.completion_ids.shape
        n = self.samples
        valid = batch.completion_mask.cpu()[:, None, :].expand(-1, n, -1)
        present = batch.completion_attn.cpu()[:, None, :]
        lv = valid[:, 0].sum(1).double()[:, None]  # (B, 1)
        u = torch.rand(b, n, length, generator=generator, dtype=torch.float64)
        light = torch.rand(b, n, length, generator=generator, dtype=torch.float64) < self.prompt_mask_prob
        if self.masking == "random":
            count = uniform_int(*self._count_range(lv.expand(-1, n)), generator)
            masked = (random_rank(u, valid) < count[..., None]) & valid
        else:
            k = self.block_length
            token_block = torch.arange(length) // k
            n_valid = ((lv - 1).clamp(min=0) // k + 1).long()  # blocks holding counted tokens (B, 1)
            order = torch.rand(b, -(-length // k), generator=generator).argsort(-1)  # distinct blocks per draw
            chosen = order[:, torch.arange(n) % order.shape[1]] % n_valid  # (B, n)
            here = (token_block == chosen[..., None]) & valid
            count = uniform_int(*self._count_range(here.sum(-1).double()), generator)
            after = (token_block > chosen[..., None]) & present
            before = (token_block < chosen[..., None]) & present
            masked = ((random_rank(u, here) < count[..., None]) & here) | after | (light & before)
        masked |= (present & ~valid)
        prompt_rand = torch.rand(b, n, batch.prompt_ids.shape[1], generator=generator)
        prompt_masked = (prompt_rand < self.prompt_mask_prob) & batch.prompt_mask.cpu()[:, None, :]
        t = (masked & valid).sum(-1).double() / lv.clamp(min=1)
        return {"masked": masked, "t": t, "prompt_masked": prompt_masked}

    def draw_logp(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        """log p of every completion token under each draw's corruption: (n, B, T)."""
        layout = build_layout(batch)
        device = layout.tokens.device
        masked = noise["masked"].to(device).transpose(0, 1)  # (n, B, T)
        n = masked.shape[0]
        inputs = layout.tokens.repeat(n, 1)
        width = layout.prompt_width
        prompt_masked = noise["prompt_masked"].to(device).transpose(0, 1).reshape(-1, width)
        inputs[:, :width] = inputs[:, :width].masked_fill(prompt_masked, policy.mask_id)
        inputs[:, width:] = inputs[:, width:].masked_fill(masked.reshape(-1, masked.shape[-1]), policy.mask_id)
        return response_logp(policy, layout, inputs, batch, n)

    def _weights(self, batch: RolloutBatch, noise: dict[str, torch.Tensor], dtype) -> torch.Tensor:
        """1{i masked and counted} / t_j: (n, B, T)."""
        device = batch.completion_ids.device
        scored = noise["masked"].to(device) & batch.completion_mask[:, None, :]
        level = noise["t"].to(device).clamp(min=1e-12)[..., None]
        return (scored / level).to(dtype).transpose(0, 1)

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        est = self.draw_logp(policy, batch, noise)
        weight = self._weights(batch, noise, est.token_logp.dtype)
        return Estimate((est.token_logp * weight).mean(0), est.entropy.mean(0))

    def bounds(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor],
               beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token lower (ELBO) and upper (EUBO with ``beta``) contributions (B, T) and the entropy (B, T)."""
        est = self.draw_logp(policy, batch, noise)
        lp = est.token_logp
        weight = self._weights(batch, noise, lp.dtype)
        lower = (lp * weight).mean(0)
        hit = weight > 0
        seen = hit.any(0)  # (B, T): masked in at least one draw
        # log q_i = log mean_j [w_ij p_ij^beta] as a log-sum-exp; unseen tokens get a finite dummy, then 0
        scores = torch.where(hit, beta * lp + weight.clamp(min=1e-30).log(), torch.full_like(lp, -math.inf))
        scores = torch.where(seen[None], scores, torch.zeros_like(scores))
        log_q = torch.logsumexp(scores, 0) - math.log(lp.shape[0])
        counted = batch.completion_mask & seen
        scale = batch.completion_mask.sum(1, keepdim=True) / counted.sum(1, keepdim=True).clamp(min=1)
        upper = torch.where(counted, log_q / beta, torch.zeros_like(log_q)) * scale.to(lp.dtype)
        return lower, upper, est.entropy.mean(0)
