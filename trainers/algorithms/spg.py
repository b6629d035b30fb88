"""SPG, Sandwiched Policy Gradient (Wang et al. 2025, arXiv 2510.09541, facebookresearch/SPG). Masked diffusion only.

A policy gradient on likelihood *bounds* chosen by the sign of the advantage: sequences with A > 0 raise the
lower bound (ELBO), sequences with A <= 0 lower an upper bound, by default SPG's mixture
``mix_weight * EUBO + (1 - mix_weight) * ELBO`` (``negative_bound``: mix, eubo, elbo or zero), so both pushes
act on the side of log p that they are meant to move. No ratio, no clipping, no KL (SPG rejects a KL term):
``loss = -sum_b A_b bound_b / sum_b L_v,b``, i.e. each row's per-token average weighted by its length.

Paper defaults (facebookresearch/SPG scripts for GSM8K/MATH): block_random masking with the rollout's block
length, 2 Monte-Carlo masks per sequence (``num_t``), 4 inner updates with fresh masks (``num_iterations``),
beta_EUBO 1.5 (1.0 Sudoku, 2.0 Countdown), mix weight 0.5, advantage r - mean (no std), tail after EOS masked.
DARE's choices (one mask, one update, GRPO std advantage, padding counted) are configs/algorithms/spg_dare.yaml.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dare.harness.errors import ConfigError

from ..advantages import AdvantageName
from ..api import Algorithm, AlgorithmConfig, Estimator, Needs, algorithm


class SPGConfig(AlgorithmConfig):
    estimator_args: dict = Field(default_factory=lambda: {"samples": 2, "masking": "block_random",
                                                          "block_length": 32, "prompt_mask_prob": 0.15})
    inner_steps: int = 4
    resample_noise: bool = True
    advantage: AdvantageName = "mean_baseline"
    advantage_eps: float = Field(1e-6, gt=0)
    negative_bound: Literal["mix", "eubo", "elbo", "zero"] = Field(
        "mix", description="likelihood surrogate of sequences with A <= 0 (SPG logp_estimation)")
    mix_weight: float = Field(0.5, ge=0, le=1, description="EUBO share of the 'mix' surrogate")
    eubo_beta: float = Field(1.5, gt=0, description="beta of the EUBO (1.5 math, 1.0 Sudoku, 2.0 Countdown)")


@algorithm("spg")
class SPG(Algorithm):
    """REINFORCE on the ELBO for A > 0 and on the EUBO / ELBO mixture for A <= 0 (block-random masks)."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = SPGConfig
    policy_loss = "sandwich"
    default_estimator = "sandwich"

    def bind(self, attention: str) -> Estimator:
        est = super().bind(attention)
        if "bounds" not in est.capabilities:
            raise ConfigError(f"spg needs an estimator with lower and upper bounds (sandwich); {est.name!r} "
                              "gives only one estimate")
        return est
