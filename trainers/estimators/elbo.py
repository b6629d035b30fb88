"""Monte-Carlo ELBO estimators of log p(y | x): masked diffusion (``mc_elbo``) and block diffusion
(``block_elbo``, the noisy + clean copy with the block attention mask).

Each of ``samples`` draws a noise level t ~ U(eps, 1) (``stratified``: one per stratum, VRPO style),
masks every present response token with probability t and weighs the masked tokens' log-probs by 1/t;
token_logp is the mean over draws. Guarantee: for a model whose conditionals are those of one joint
distribution the expectation is exactly log p(y) (up to the O(eps) cut at t = eps), since the 1/t
weights integrate to the chain rule averaged over orders; for any other model it is the ELBO.
``antithetic`` pairs draw j + 1 with (1 - t, 1 - u): complementary masks, each token masked in exactly one
of the pair. The draws are stored in the batch and shared by the behaviour, current and reference passes
(shared noise: their difference has low variance).
"""

from __future__ import annotations

import torch

from ..api import Estimator, estimator
from ..batch import Estimate, RolloutBatch
from ..training.sequences import build_layout, noisy_clean_mask
from .masked import response_logp


@estimator("mc_elbo")
class MonteCarloELBO(Estimator):
    """Masked-diffusion ELBO: ``samples`` draws of (t, mask), 1/t-weighted masked log-probs (shared noise)."""

    forwards = 1
    capabilities = frozenset({"samples"})

    def __init__(self, samples: int = 1, eps: float = 1e-3, antithetic: bool = False, stratified: bool = False,
                 force_one: bool = False):
        if samples < 1 or (antithetic and samples % 2):
            raise ValueError("samples must be >= 1 (and even with antithetic pairs)")
        self.samples, self.eps, self.antithetic, self.stratified = int(samples), float(eps), antithetic, stratified
        self.force_one = bool(force_one)

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """t (B, n) float64 noise levels and masked (B, n, T) bool."""
        b, length = batch.completion_ids.shape
        n = self.samples
        base = torch.rand(b, n, generator=generator, dtype=torch.float64)
        if self.stratified:
            base = (torch.arange(n, dtype=torch.float64) + base) / n
        level = (1 - self.eps) * base + self.eps
        u = torch.rand(b, n, length, generator=generator, dtype=torch.float64)
        if self.antithetic:
            level[:, 1::2] = (1 - level[:, 0::2]).clamp(min=self.eps)
            u[:, 1::2] = 1 - u[:, 0::2]
        present = batch.completion_attn.cpu()[:, None, :]
        masked = (u < level[..., None]) & present
        if self.force_one:  # SDAR: a draw that masks nothing masks its lowest-u present token instead
            empty = ~masked.any(-1)
            first = u.masked_fill(~present, 2.0).argmin(-1)
            masked |= torch.nn.functional.one_hot(first, length).bool() & empty[..., None] & present
        return {"t": level, "masked": masked}

    def _forward(self, policy, batch: RolloutBatch, masked: torch.Tensor) -> Estimate:
        """masked (n, B, T) -> log p of the completion tokens per draw (n, B, T)."""
        layout = build_layout(batch)
        inputs = layout.tokens.repeat(masked.shape[0], 1)
        resp = inputs[:, layout.response]
        inputs[:, layout.response] = resp.masked_fill(masked.reshape(-1, masked.shape[-1]), policy.mask_id)
        return response_logp(policy, layout, inputs, batch, masked.shape[0])

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        device = batch.completion_ids.device
        masked = noise["masked"].to(device).transpose(0, 1)  # (n, B, T)
        level = noise["t"].to(device).T[..., None]  # (n, B, 1)
        est = self._forward(policy, batch, masked)
        weighted = est.token_logp * masked / level.to(est.token_logp.dtype)
        return Estimate(weighted.mean(0), est.entropy.mean(0))


@estimator("block_elbo")
class BlockELBO(MonteCarloELBO):
    """Block-diffusion ELBO: input ``[noisy | clean]`` (2L) with :func:`noisy_clean_mask`; one forward per
    draw. Each block is predicted from its own noisy tokens and the clean earlier blocks."""

    def _forward(self, policy, batch: RolloutBatch, masked: torch.Tensor) -> Estimate:
        if policy.block_size is None:
            raise ValueError("block_elbo needs a block-diffusion model (block_size)")
        layout = build_layout(batch)
        n, b = masked.shape[0], batch.size
        noisy = layout.tokens.repeat(n, 1)
        resp = noisy[:, layout.response]
        noisy[:, layout.response] = resp.masked_fill(masked.reshape(-1, masked.shape[-1]), policy.mask_id)
        inputs = torch.cat([noisy, layout.tokens.repeat(n, 1)], dim=1)
        positions = layout.positions.repeat(n, 2)
        mask = noisy_clean_mask(layout.positions, layout.valid, policy.block_size).repeat(n, 1, 1, 1)
        index = layout.response_index().repeat(n, 1)
        logp, entropy = policy.token_logp(inputs, positions, mask, index, batch.completion_ids.repeat(n, 1))
        return Estimate(logp.view(n, b, -1), entropy.view(n, b, -1))
