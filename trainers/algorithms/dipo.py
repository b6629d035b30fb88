"""DiPO (DiRL, arXiv 2512.22234): unbiased GRPO for block diffusion models on exact per-step likelihoods.

The rollout records which tokens each decoding step committed; ``block_trajectory`` replays every step's
state in one packed forward, so the ratio is over exact conditionals. Defaults follow OpenMOSS/DiRL's
rl.yaml: clip 0.2 (no dual clip), beta 0.1 with k3 against the frozen reference, std-normalised group
advantages, token-level mean over the batch. ``drop_equal_groups`` is DAPO's dynamic sampling without
the refill: groups whose rewards are all equal get zero advantage (they carry no signal).
"""

from __future__ import annotations

import torch
from pydantic import Field

from ..api import Needs, algorithm
from ..batch import RolloutBatch
from .policy_gradient import PolicyGradient, PolicyGradientConfig


class DiPOConfig(PolicyGradientConfig):
    estimator: str = "block_trajectory"
    clip_c: float | None = None
    beta: float = 0.1
    drop_equal_groups: bool = Field(True, description="zero advantage for groups with identical rewards")


@algorithm("dipo")
class DiPO(PolicyGradient):
    """Clipped GRPO on exact per-step likelihoods replayed from the rollout's step map (block models)."""

    needs = Needs(rollout=True, trajectory=True, attention="block_causal")
    Config = DiPOConfig
    default_estimator = {"block_causal": "block_trajectory"}

    def advantages(self, batch: RolloutBatch) -> torch.Tensor:
        adv = super().advantages(batch)
        if self.config.drop_equal_groups:
            _, inverse = torch.unique(batch.group_ids, return_inverse=True)
            n = int(inverse.max()) + 1
            r = batch.rewards
            lo = torch.full((n,), float("inf"), dtype=r.dtype, device=r.device).scatter_reduce(0, inverse, r, "amin")
            hi = torch.full((n,), float("-inf"), dtype=r.dtype, device=r.device).scatter_reduce(0, inverse, r, "amax")
            adv = torch.where((hi - lo)[inverse] == 0, torch.zeros_like(adv), adv)
        return adv
