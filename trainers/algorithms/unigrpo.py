"""UniGRPO as random-masking RL (MMaDA's UniGRPO, implemented in Gen-Verse/dLLM-RL@10b4fd1 ``train/rl_llada.py``
with ``training.method: random_masking``; rewards from ``reward/rl_reward.py``). Masked diffusion only:
``train/rl_sdar.py``'s random masking is another scheme (one ``[clean | noisy]`` copy, a rate per token), not
ported.

Per rollout, 35 masked copies, each with its own t ~ U[0.1, 0.9] and i.i.d. Bernoulli(t) masks over the response
(``random_masking``); old log-probs on the same copies before the update. Loss (``draw_ppo``) per copy: the token
mean of the clipped surrogate (eps 0.2) over its masked tokens plus 0.01 x the token sum of k3 against the *old*
log-probs (no reference model), averaged over the copies. Advantages: the group's rewards z-scored with the
population std, 0 for a group of equal rewards (``z_score_normalize``: ``population``). Groups whose pass rate
(mean reward: dLLM-RL rewards are 0/1 correctness) is above 0.8 or below 0.2 are dropped when the advantages
are formed (``pass_rate_band``; None keeps every group). Defaults from ``configs/rl_llada.yaml`` (eps 0.2, beta 0.01,
``use_kl_estimator_k3``, lower_p 0.1, upper_p 0.9, mask_times_per_sample 35, one epoch). Not ported: dLLM-RL
counts responses within 5 tokens of the length limit as wrong (DARE's rewards are the verifier's), and its
gradient accumulation makes one optimizer step per 256 masked copies (here one update over all of them).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, model_validator

from ..advantages import AdvantageName
from ..api import Algorithm, Needs, algorithm
from ..batch import RolloutBatch
from ..losses.ppo import PolicyGradientConfig


class UniGRPOConfig(PolicyGradientConfig):
    advantage: AdvantageName = "population"
    clip_low: float = 0.2
    clip_high: float = 0.2
    beta: float = 0.01
    kl_to: Literal["old", "reference"] = Field(
        "old", description="old: the KL is taken against the behaviour policy's log-probs on the same masked copy "
        "(dLLM-RL); reference: against the frozen initial model")
    pass_rate_band: tuple[float, float] | None = Field(
        (0.2, 0.8), description="keep only groups whose mean reward lies in [low, high] (dLLM-RL drops > 0.8 and "
        "< 0.2); None keeps every group")

    @model_validator(mode="after")
    def _band(self):
        if self.pass_rate_band is not None and not self.pass_rate_band[0] <= self.pass_rate_band[1]:
            raise ValueError(f"pass_rate_band must be (low, high) with low <= high, got {self.pass_rate_band}")
        return self


def kept_groups(rewards: torch.Tensor, group_ids: torch.Tensor, band: tuple[float, float]) -> torch.Tensor:
    """Rows (B,) bool whose group's mean reward lies in ``band`` (inclusive)."""
    keep = torch.zeros_like(group_ids, dtype=torch.bool)
    for g in torch.unique(group_ids):
        rows = group_ids == g
        rate = float(rewards[rows].double().mean())
        keep[rows] = band[0] <= rate <= band[1]
    return keep


@algorithm("unigrpo", aliases=("uni_grpo",))
class UniGRPO(Algorithm):
    """Clipped PPO averaged per randomly masked copy, k3 KL to the behaviour policy, mid-pass-rate groups only."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = UniGRPOConfig
    policy_loss = "draw_ppo"
    default_estimator = "random_masking"

    def requirements(self) -> Needs:
        needs = super().requirements()
        if self.config.kl_to == "old":  # the KL needs no reference model
            needs = Needs(**{**vars(needs), "reference": self.needs.reference})
        return needs

    def advantages(self, batch: RolloutBatch) -> torch.Tensor:
        """Population z-scores; the groups outside the pass-rate band are dropped here, where the rewards become
        advantages (the driver, under verl): their rows count no token in the loss and their advantage is 0."""
        adv = super().advantages(batch)
        band = self.config.pass_rate_band
        if band is None:
            return adv
        keep = kept_groups(batch.rewards, batch.group_ids, band).to(batch.completion_mask.device)
        batch.completion_mask = batch.completion_mask & keep[:, None]
        return adv * keep.to(adv.device, adv.dtype)
