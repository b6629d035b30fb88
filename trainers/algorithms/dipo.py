"""DiPO (DiRL, arXiv 2512.22234): unbiased GRPO for block diffusion models on exact per-step likelihoods.

Objective: ``token_ppo`` (clipped token ratios + beta k3 to the reference) with DiRL's reduction below.
The rollout records which tokens each decoding step committed; ``block_trajectory`` replays every step's
state in one packed forward, so the ratio is over exact conditionals. Defaults follow OpenMOSS/DiRL
(configs/rl.yaml, models/sdar/modeling_sdar.py RL loss, train/grpo.py): clip 1 - 0.2 / 1 + 0.2 + 0.08
(``ratio_p.clamp(1 - ppo_eps, 1 + ppo_eps + 0.08)``), log-ratio clamped to [-10, 10] in DiRL (here [-20, 20]),
beta 0.1 with k3 against the frozen reference, advantages z-scored with the population std and no eps
(``z_score_normalize``: 0 for a group of equal rewards). Reduction ``round``: DiRL trains one sample per
(response, round), round k holding the tokens committed at the k-th denoising step of every block
(``generate_training_samples_for_one``); each sample's loss is its token mean and the gradient is divided
by the accumulation count, responses x block size. ``token`` (preset ``dipo_token_mean``) is the paper's
DAPO-style token mean over the batch.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from ..advantages import AdvantageName
from ..api import Algorithm, Needs, algorithm
from ..batch import LossOutput, RolloutBatch
from ..losses.ppo import PolicyGradientConfig
from ..ops import masked_mean
from ..training.sequences import build_layout


def commit_rounds(commit_step: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, block: int) -> torch.Tensor:
    """Round of each counted token: the rank of its commit step among the distinct commit steps of its
    (row, block). commit_step/positions/mask (B, T) -> (B, T) long (-1 where ``mask`` is False)."""
    b, t = commit_step.shape
    blocks = positions // block
    n_blocks = int(blocks.max()) + 1 if blocks.numel() else 1
    n_steps = int(commit_step.max()) + 2 if commit_step.numel() else 1
    rows = torch.arange(b, device=commit_step.device)[:, None].expand(b, t)
    key = (rows * n_blocks + blocks) * n_steps + commit_step.clamp(min=0)
    key = torch.where(mask, key, torch.full_like(key, -1))
    _, rank = torch.unique(key, return_inverse=True)  # dense rank in increasing (row, block, step) order
    cell = torch.where(mask, rows * n_blocks + blocks, torch.zeros_like(rows))
    first = torch.full((b * n_blocks,), rank.numel() + 1, dtype=rank.dtype, device=rank.device)
    first = first.scatter_reduce(0, cell[mask], rank[mask], "amin")
    return torch.where(mask, rank - first[cell], torch.full_like(rank, -1))


def round_sums(token_loss: torch.Tensor, batch: RolloutBatch, mask: torch.Tensor,
               block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-(row, round) token-loss sums and token counts. token_loss/mask (B, T) -> two (B*T,) tensors indexed
    row * T + round (rounds of a row never exceed T); cells without a counted token hold 0."""
    layout = build_layout(batch)
    counted = mask & (batch.commit_step >= 0)
    rounds = commit_rounds(batch.commit_step, layout.positions[:, layout.response], counted, block)
    b, t = token_loss.shape
    cell = (torch.arange(b, device=rounds.device)[:, None] * t + rounds.clamp(min=0))[counted]
    total = token_loss.new_zeros(b * t).index_add(0, cell, token_loss[counted])
    count = token_loss.new_zeros(b * t).index_add(0, cell, torch.ones_like(token_loss[counted]))
    return total, count


class DiPOConfig(PolicyGradientConfig):
    advantage: AdvantageName = "population"
    clip_low: float = 0.2
    clip_high: float = Field(0.28, ge=0, description="upper clip: DiRL's 1 + eps + 0.08 with eps 0.2")
    beta: float = 0.1
    reduction: Literal["round", "token"] = Field(
        "round", description="round: token mean per (response, round), / (responses x block size) (DiRL); "
        "token: one token mean over the batch (the paper's DAPO normalisation)")
    drop_equal_groups: bool = Field(True, description="zero advantage for groups with identical rewards")


@algorithm("dipo")
class DiPO(Algorithm):
    """Clipped GRPO (``token_ppo``) on exact per-step likelihoods replayed from the rollout's step map (block
    models); its own: equal-reward groups dropped from the advantages, and the per-round reduction."""

    needs = Needs(rollout=True, trajectory=True, attention="block_causal")
    Config = DiPOConfig
    policy_loss = "token_ppo"
    default_estimator = "block_trajectory"
    _block: int = 1

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

    def loss(self, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        self._block = int(policy.block_size or 1)  # rounds are counted per block of the model
        return super().loss(policy, batch, inner_step)

    def reduce(self, token_loss: torch.Tensor, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
        """round: sum over (row, round) of the round's token mean, / (B x block size); weight B x block size."""
        if self.config.reduction == "token" or batch.commit_step is None:  # no step map: no rounds
            return masked_mean(token_loss, mask), float(mask.sum())
        total, count = round_sums(token_loss, batch, mask, self._block)
        per_round = total / count.clamp(min=1)  # token mean of each (row, round); 0 for empty cells
        weight = float(token_loss.shape[0] * self._block)
        return per_round.sum() / weight, weight
