"""d1 / diffu-GRPO (Zhao et al. 2025): GRPO on the one-step estimate with random prompt masking.

Paper defaults (dllm-reasoning/d1 train.yaml): advantage r - mean (no std), clip 0.5, beta 0.04 (k3),
12 inner updates with a fresh prompt mask per inner iteration, tail after EOS masked. DARE's choices
(std-normalised GRPO, clip 0.2, no KL, one update per batch, one mask per batch, padding counted) are in
configs/algorithms/d1_dare.yaml.
"""

from __future__ import annotations

from pydantic import Field

from ..api import Needs, algorithm
from .policy_gradient import AdvantageKind, PolicyGradient, PolicyGradientConfig


class D1Config(PolicyGradientConfig):
    estimator: str = "one_step"
    estimator_args: dict = Field(default_factory=lambda: {"prompt_mask_prob": 0.15})
    advantage: AdvantageKind = "mean_baseline"
    clip_low: float = 0.5
    clip_high: float = 0.5
    beta: float = 0.04
    inner_steps: int = 12
    resample_noise: bool = True


@algorithm("d1", aliases=("diffu_grpo",))
class D1(PolicyGradient):
    """diffu-GRPO: token-level clipped GRPO on log p(y_i | prompt partly masked, response fully masked)."""

    needs = Needs(rollout=True, trajectory=False)
    Config = D1Config
    default_estimator = {"bidirectional": "one_step", "block_causal": "one_step"}
