"""BGPO, Boundary-Guided Policy Optimization (Lin et al. 2025; THU-KEG/BGPO, as run in yjyddq/DARE).

The likelihood is n = 16 stratified ELBO samples per sequence (``stratified_elbo`` for masked diffusion,
``block_stratified_elbo`` with the ``[noisy | clean]`` forward for block diffusion), each normalised by the
padded response length L: l_j = ELBO_j / L. Each sample j gets its own surrogate against its own old value:

- A > 0: r_j = 1 + (l_j - l_j_old), the tangent of exp at 0, a lower bound of exp(l_j - l_j_old) that is
  *linear* in l_j;
- A <= 0: r_j = exp(l_j - l_j_old); by Jensen mean_j exp(d_j) >= exp(mean_j d_j), so -A mean_j r_j bounds the
  sequence objective from the same side.

Both bounds are sums over samples, so each MC sample's gradient is taken on its own
(``bgpo_bounds`` yields one loss term per sample: the trainer backpropagates one sample before the next forward,
BGPO's constant memory in n); at l = l_old both give the gradient -A grad l_j. Then the dual-clip PPO loss (eps
0.2, c 3) per sample, averaged over samples, and a length-weighted mean over sequences (DARE's token mean of a
value constant over each row's counted tokens). The n samples travel as n noise sets of one draw each
(:meth:`BGPO.draw_noise`), so the trainer's old and reference passes keep one value per sample.
DARE's LLaDA / Dream runs count the EOS padding: configs/algorithms/bgpo_dare.yaml.
"""

from __future__ import annotations

import torch
from pydantic import Field

from dare.harness.errors import ConfigError

from ..api import Algorithm, Estimator, Needs, algorithm
from ..batch import RolloutBatch
from ..losses.ppo import PolicyGradientConfig


class BGPOConfig(PolicyGradientConfig):
    estimator_args: dict = Field(default_factory=lambda: {"samples": 16})
    clip_c: float | None = Field(3.0, gt=1, description="dual-clip constant (BGPO as run in DARE: 3)")
    beta: float = Field(0.0, ge=0, le=0, description="BGPO's objective has no KL term")
    normalise_length: int | None = Field(None, ge=1, description="divide each ELBO sample by this length; "
                                         "None: the batch's padded response length (DARE max_response_length)")


@algorithm("bgpo")
class BGPO(Algorithm):
    """Per-MC-sample linear (A > 0) / exponential (A <= 0) bound surrogates with dual-clip PPO."""

    needs = Needs(rollout=True)
    Config = BGPOConfig
    policy_loss = "bgpo_bounds"
    default_estimator = {"bidirectional": "stratified_elbo", "block_causal": "block_stratified_elbo"}

    def bind(self, attention: str) -> Estimator:
        est = super().bind(attention)
        if "samples" not in est.capabilities:
            raise ConfigError(f"bgpo needs a Monte-Carlo ELBO estimator with per-sample draws (stratified_elbo, "
                              f"block_stratified_elbo, mc_elbo, block_elbo); {est.name!r} has none")
        return est

    @property
    def samples(self) -> int:
        return int(self.estimator.samples)

    def draw_noise(self, estimator: Estimator, batch: RolloutBatch, generator: torch.Generator) -> list[dict]:
        """Each stratified draw of n samples split into n sets of one (tensors whose dim 1 is the sample axis)."""
        sets = []
        for draw in super().draw_noise(estimator, batch, generator):
            n = self.samples
            sets += [{k: v[:, j:j + 1] for k, v in draw.items()} for j in range(n)]
        return sets
