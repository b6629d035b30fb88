"""RLDF, reinforcement learning from denoising feedback (ant-research/Drift@7abd99b, arXiv 2605.25638). Masked
diffusion only.

The policy is scored on denoising states replayed from the rollout's own trajectory: per rollout, 4 decoding
steps drawn by surprisal (``replay_steps``: softmax of the mean -log p of each step's committed tokens,
temperature 1, without replacement), each scored at every position still masked before it; tokens below
probability 0.6 are dropped except those the step committed (``replay_pg``). One update per batch: REINFORCE
-A log p; more: PPO-clip 0.2. KL: beta 0.01 x k3 to the reference. Loss: per chosen-step index the token mean
over the batch, divided by the number of steps (``loss_norm: token``). Advantages (``std_floor``):
(r - mean) / max(std + 1e-8, 1e-2) over the group (``DriftTrainer.compute_loss``). Defaults from
``configs/llada_math.yaml`` (``mask_strategy: sequential_masking``, ``mask_num`` 4, ``sample_temperature`` 1,
``low_prob_threshold`` 0.6, ``num_iterations`` 1, beta 0.01 k3, ``loss_norm: token``).

What the rollout records: the step map (``commit_step``, as every trajectory method) and each token's
probability at its commit (Drift's ``token_probs``: the untempered softmax of the sampled token). The latter is
not stored by DARE's decoders; ``prepare`` replays it exactly from the step map under the policy that decoded
the batch (``mdm_trajectory`` at temperature 1, one forward per decoding step; exact for decoders that never
rewrite a committed token). Not ported: ``filter_rollout_samples`` (a cap on groups per batch: DARE's
``prompts_per_step``) and the MATH_rldf data selection (prompts with non-zero reward variance).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from ..advantages import AdvantageName, advantage
from ..api import Algorithm, AlgorithmConfig, Needs, algorithm, build_estimator
from ..batch import RolloutBatch


@advantage("std_floor")
def std_floor_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(r - mean_g) / max(std_g + eps, 1e-2) with the unbiased std (Drift: a group of equal rewards gets 0, never
    a division by ~0; a group of one gets 0)."""
    centred = torch.zeros_like(rewards, dtype=torch.float64)
    for g in torch.unique(group_ids):
        rows = group_ids == g
        r = rewards[rows].double()
        spread = r.std() if r.numel() > 1 else torch.tensor(0.0, dtype=torch.float64)
        centred[rows] = (r - r.mean()) / torch.clamp(spread + eps, min=1e-2)
    return centred.to(rewards.dtype)


class RLDFConfig(AlgorithmConfig):
    advantage: AdvantageName = "std_floor"
    advantage_eps: float = Field(1e-8, gt=0)
    clip_low: float = Field(0.2, ge=0, description="PPO lower clip (used with inner_steps > 1)")
    clip_high: float = Field(0.2, ge=0, description="PPO upper clip (used with inner_steps > 1)")
    beta: float = Field(0.01, ge=0, description="KL coefficient against the frozen reference model")
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    low_prob_threshold: float = Field(0.6, ge=0, lt=1, description="drop replayed tokens below this probability, "
                                      "except those committed at the replayed step (0: keep all)")
    loss_norm: Literal["token", "sample"] = Field("token", description="token: per chosen step the batch's token "
                                                  "mean; sample: each row's token mean, averaged")


@algorithm("rldf", aliases=("drift",))
class RLDF(Algorithm):
    """REINFORCE / PPO on the rollout's own denoising states, chosen by surprisal, low-probability tokens dropped."""

    needs = Needs(rollout=True, trajectory=True, attention="bidirectional")
    Config = RLDFConfig
    policy_loss = "replay_pg"
    default_estimator = "replay_steps"

    @torch.no_grad()
    def prepare(self, policy, batch: RolloutBatch, scorer) -> None:
        """Each token's log-probability at its commit, replayed under the policy that decoded the batch
        (``batch.extras["commit_logp"]`` (B, T)); skipped when the step draw is uniform."""
        if getattr(self.estimator, "uniform", True):
            return
        here = batch.completion_ids.device
        replay = build_estimator("mdm_trajectory", {})
        logp = replay.estimate(policy, batch.to(policy.device), {}).token_logp
        batch.extras["commit_logp"] = logp.to(here)
