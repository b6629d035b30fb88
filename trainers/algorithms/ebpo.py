"""EBPO, ELBO-based Block Policy Optimization (LLaDA2.1 report; yjyddq/DARE ebpo actors). Block diffusion only.

Objective, per rollout (``sequence_log_clip``): E = the all-block stratified composite ELBO
(``block_composite_elbo``, N = 16 draws, every response block masked in every draw); one sequence ratio
rho = exp(E - E_old) clipped in log space (A >= 0: log rho <- min(log rho, log(1 + eps_high)); A < 0:
log rho <- max(log rho, log(1 - eps_low))); loss = mean over sequences of -A exp(log rho) (no dual clip),
plus an optional KL (off by default) on E - E_ref. A: GRPO (std-normalised). DARE runs it as the report
describes (SDAR: block 4, mc 16, clip 0.2); there is no DARE preset.
"""

from __future__ import annotations

from pydantic import Field

from ..api import Algorithm, Needs, algorithm
from ..losses.ppo import PolicyGradientConfig


class EBPOConfig(PolicyGradientConfig):
    estimator_args: dict = Field(default_factory=lambda: {"samples": 16})
    clip_c: float | None = Field(None, gt=1, description="EBPO has no dual clip")


@algorithm("ebpo")
class EBPO(Algorithm):
    """Sequence-ratio PPO on the composite block ELBO, clipped in log space."""

    needs = Needs(rollout=True, attention="block_causal")
    Config = EBPOConfig
    policy_loss = "sequence_log_clip"
    default_estimator = "block_composite_elbo"
