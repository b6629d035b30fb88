"""TraceRL (Gen-Verse/dLLM-RL, trajectory-aware RL for block diffusion models; the baseline DiRL compares to).

Like DiPO, the policy is trained on the rollout's own decoding trajectory: one training sample per
(response, round), round k holding the tokens each block committed at its k-th decoding step
(train/rl_sdar.py ``one_round_vectorized``, method "TraceRL"), scored on the exact state of that step
(``block_trajectory``). Defaults from dLLM-RL at 10b4fd1 (configs/rl_sdar.yaml, train/rl_sdar.py
``forward_process``, reward/rl_reward.py ``z_score_normalize``): advantages z-scored with the population std
(0 for a group of equal rewards), log-ratio clamped before exp, clip 0.2 / 0.2, each sample's loss
-sum_tokens min(r A, clip(r) A) / L1 with L1 the response length, samples averaged (gradient accumulation),
beta 0.01 with k3 taken against the *behaviour* policy (``logp_new - logp_old``, no reference model), also
summed over the round's tokens / L1; ``shrink`` = 1 and ``post_num`` = 0 (the tail after EOS is not scored).
Block diffusion only; no value model (the ``*_with_value`` recipes are not ported).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import torch
from pydantic import Field

from ..advantages import AdvantageName
from ..api import Needs, algorithm
from ..batch import LossOutput, RolloutBatch
from .dipo import DiPO, DiPOConfig, round_sums


class TraceRLConfig(DiPOConfig):
    advantage: AdvantageName = "population"
    clip_low: float = 0.2
    clip_high: float = Field(0.2, ge=0, description="upper clip (TraceRL: symmetric eps 0.2)")
    beta: float = Field(0.01, ge=0, description="KL coefficient (k3)")
    kl_to: Literal["old", "reference"] = Field(
        "old", description="old: the KL is taken against the behaviour policy's log-probs (dLLM-RL); reference: "
        "against the frozen initial model")
    reduction: Literal["round", "token"] = "round"


@algorithm("trace_rl", aliases=("tracerl",))
class TraceRL(DiPO):
    """Clipped policy gradient on the decoding trajectory, one sample per (response, round), / L1 each."""

    needs = Needs(rollout=True, trajectory=True, attention="block_causal")
    Config = TraceRLConfig

    def requirements(self) -> Needs:
        needs = super().requirements()
        if self.config.kl_to == "old":  # the KL needs no reference model
            needs = Needs(**{**vars(needs), "reference": self.needs.reference})
        return needs

    def loss(self, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        if self.config.beta > 0 and self.config.kl_to == "old":
            batch = replace(batch, ref_logp=batch.old_logp)
        return super().loss(policy, batch, inner_step)

    def reduce(self, token_loss: torch.Tensor, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
        """round: each (row, round) sample's token sum / L1, averaged over the samples; weight = their count."""
        if self.config.reduction == "token" or batch.commit_step is None:
            return super().reduce(token_loss, batch, mask)
        total, count = round_sums(token_loss, batch, mask, self._block)
        samples = float((count > 0).sum())
        return total.sum() / (token_loss.shape[1] * max(samples, 1.0)), samples
