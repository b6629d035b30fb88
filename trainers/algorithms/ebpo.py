"""EBPO, ELBO-based Block Policy Optimization (LLaDA2.1 report; yjyddq/DARE ebpo actors). Block diffusion only.

The likelihood is the all-block stratified composite ELBO E (``block_composite_elbo``, N = 16 draws, every
response block masked in every draw). One *sequence-level* ratio rho = exp(E - E_old), clipped in log space:
A >= 0: log rho <- min(log rho, log(1 + eps_high)); A < 0: log rho <- max(log rho, log(1 - eps_low)); loss =
mean over sequences of -A exp(log rho) (the PPO max(-A rho, -A clip(rho)) without overflow, no dual clip).
Optional KL (off by default) k1 / k2 / k3 on E - E_ref. DARE runs it as the report describes (SDAR: block 4,
mc 16, clip 0.2, GRPO std advantages); there is no DARE preset.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from ..api import Needs, algorithm
from ..ops import safe_exp
from .policy_gradient import PolicyGradientConfig
from .sequence_ratio import SequenceRatio


def log_clipped_ratio(log_ratio: torch.Tensor, adv: torch.Tensor, eps_low: float, eps_high: float) -> torch.Tensor:
    """EBPO's clip in log space on sequence log-ratios (B,): the clipped log rho (B,)."""
    upper = torch.minimum(log_ratio, torch.full_like(log_ratio, math.log1p(eps_high)))
    lower = torch.maximum(log_ratio, torch.full_like(log_ratio, math.log1p(-eps_low)))
    return torch.where(adv >= 0, upper, lower)


class EBPOConfig(PolicyGradientConfig):
    estimator: str = "block_composite_elbo"
    estimator_args: dict = Field(default_factory=lambda: {"samples": 16})
    clip_c: float | None = Field(None, gt=1, description="EBPO has no dual clip")


@algorithm("ebpo")
class EBPO(SequenceRatio):
    """Sequence-ratio PPO on the composite block ELBO, clipped in log space."""

    needs = Needs(rollout=True, attention="block_causal")
    Config = EBPOConfig
    default_estimator = {"block_causal": "block_composite_elbo"}

    def surrogate(self, log_ratio: torch.Tensor, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        clipped = log_clipped_ratio(log_ratio, adv, self.config.clip_low, self.config.clip_high)
        return -adv * safe_exp(clipped), clipped.detach() != log_ratio.detach()
