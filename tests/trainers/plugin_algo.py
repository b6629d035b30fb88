"""Add an RL algorithm in one file (docs/house_trainers.md): a toy REINFORCE on the Monte-Carlo ELBO.

Importing this module registers its loss (``@policy_loss``) and its algorithm (``@algorithm``); a package
makes that import happen by naming the module in its ``dare.plugins`` entry point. The trainer then calls,
per step: ``advantages`` (the registered estimator the config names, here ``rloo``), the estimator's draws,
and the loss named by ``policy_loss`` for every inner update and micro-batch.
"""

from __future__ import annotations

from pydantic import Field

from dare.trainers import Algorithm, AlgorithmConfig, LossOutput, Needs, algorithm
from dare.trainers.advantages import AdvantageName
from dare.trainers.losses import policy_loss


@policy_loss("toy/reinforce_elbo")
def reinforce_elbo(algo, policy, batch, inner_step: int) -> LossOutput:
    """-A x the per-token ELBO of each row (its sequence ELBO / its length), mean over rows."""
    est = algo.estimator.estimate(policy, batch, batch.noise[inner_step % len(batch.noise)])
    mask = batch.completion_mask
    per_row = (est.token_logp * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # (B,)
    loss = -(batch.advantages.to(per_row.dtype) * per_row).mean()
    return LossOutput(loss=loss, weight=float(batch.size), metrics={"toy_elbo": float(per_row.detach().mean())})


class ToyReinforceConfig(AlgorithmConfig):
    advantage: AdvantageName = Field("rloo", description="advantage estimator: leave-one-out baseline")
    advantage_eps: float = Field(1e-6, gt=0)
    estimator_args: dict = Field(default_factory=lambda: {"samples": 2, "antithetic": True})


@algorithm("toy/reinforce")
class ToyReinforce(Algorithm):
    """REINFORCE with a leave-one-out baseline on the antithetic Monte-Carlo ELBO."""

    needs = Needs(rollout=True)
    Config = ToyReinforceConfig
    policy_loss = "toy/reinforce_elbo"
    default_estimator = {"bidirectional": "mc_elbo", "block_causal": "block_elbo"}
