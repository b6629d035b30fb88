"""Coupled-GRPO (DiffuCoder, Gong et al. 2025): GRPO on the coupled complementary-mask estimate.

Paper defaults (apple/ml-diffucoder config_coupled_code.yaml): leave-one-out advantage without std
scaling, clip 0.5, beta 0.01, 2 inner updates with fresh masks (random_masking), tail after EOS masked.
DARE (configs/algorithms/coupled_grpo_dare.yaml): std-normalised GRPO, clip 0.2, no KL, one update, and
the mask seed fixed to 42 at every step.
"""

from __future__ import annotations

from ..api import Needs, algorithm
from .policy_gradient import AdvantageKind, PolicyGradient, PolicyGradientConfig


class CoupledGRPOConfig(PolicyGradientConfig):
    estimator: str = "coupled"
    advantage: AdvantageKind = "rloo"
    clip_low: float = 0.5
    clip_high: float = 0.5
    beta: float = 0.01
    inner_steps: int = 2
    resample_noise: bool = True


@algorithm("coupled_grpo", aliases=("coupled-grpo",))
class CoupledGRPO(PolicyGradient):
    """Clipped GRPO whose token log-likelihoods come from complementary mask pairs plus a full mask."""

    needs = Needs(rollout=True, trajectory=False)
    Config = CoupledGRPOConfig
    default_estimator = {"bidirectional": "coupled", "block_causal": "coupled"}
