"""CJ-GRPO (Consistency-Trajectory GRPO, Yang et al. 2025, yjyddq/EOSER-ASS-RL): GRPO on the exact
per-step transition likelihoods of the rollout's own trajectory, with the paper's decoding.

The likelihood is the replay of the step map (``mdm_trajectory`` for LLaDA / Dream, ``block_trajectory``
for SDAR / LLaDA2): log p(y_i | state before the step that committed y_i). The loss weights every
transition equally (Eq. 11): a token's weight is 1 / (#tokens of its (row, step) transition) /
(#transitions of its row), rows averaged; ``step_pooled`` pools each step's tokens over the micro-batch
instead (the reference code's and DARE's masked-diffusion reduction), ``auto`` picks DARE's per family.

Paper defaults: advantage r - mean, clip 0.5 (no dual clip), β = 0.04 (k3), 12 inner updates, and the
rollout decodes with EOS early rejection (stop-token confidence × γ rising 0.01 -> 1) and the ascending
step-size schedule (2^k tokens at step k, about log2(K) steps per block) over one full-canvas block; the
reference code's loss keeps the tail after EOS. DARE (configs/algorithms/cj_grpo_dare.yaml): GRPO std,
clip 0.2 with dual clip 3, no KL, one update, uniform semi-AR decoding without EOSER or ASS.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from dare.backends.decoding.common import max_ascending_steps
from dare.harness.errors import ConfigError

from ..advantages import AdvantageName
from ..api import Algorithm, Estimator, Needs, RolloutAdditions, algorithm
from ..batch import LossOutput, RolloutBatch
from ..losses.ppo import PolicyGradientConfig

_SCHEDULE_DECODERS = ("mdm", "block")  # decoder families that implement eos_gamma and step_schedule


def transition_weights(commit_step: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Eq. 11: weight (B, T) = 1 / #tokens of the (row, step) transition / #transitions of the row, so each
    row's weights sum to 1 (0 for rows without a counted token). commit_step (B, T) long, mask (B, T) bool."""
    steps = torch.where(mask, commit_step, -1)
    same = (steps[:, :, None] == steps[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    per_transition = same.sum(-1).clamp(min=1)  # (B, T) tokens sharing each token's transition
    transitions = (mask.double() / per_transition).sum(-1, keepdim=True)  # (B, 1) distinct steps per row
    return torch.where(mask, 1.0 / (per_transition * transitions.clamp(min=1e-12)), 0.0)


def step_pooled_weights(commit_step: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The reference code's reduction: for each step, the mean over all of the micro-batch's tokens of that
    step, then the mean over steps: weights (B, T) summing to 1 over the micro-batch."""
    steps = torch.where(mask, commit_step, -1)
    values, inverse = torch.unique(steps, return_inverse=True)
    counts = torch.zeros(len(values), device=steps.device).index_add(0, inverse.flatten(),
                                                                      mask.flatten().float())
    n_steps = int((counts > 0).sum())
    return torch.where(mask, 1.0 / (counts[inverse].clamp(min=1) * max(n_steps, 1)), 0.0).double()


class CJGRPORollout(RolloutAdditions):
    """What CJ-GRPO's rollouts add to the evaluation's DecodingConfig (None: left as the evaluation has it)."""

    block_length: int | None = Field(None, description="the whole canvas (gen_length) for masked diffusion "
                                     "models with full_diffusion: one full-canvas block")
    steps: int | None = Field(None, description="decoding steps of the ascending schedule: ascending_steps (or "
                              "the most the block allows, about log2 of it) per block, times the blocks")
    eos_gamma: tuple[float, float] | None = Field(None, description="decoder option (extra): EOS early "
                                                  "rejection, stop-token confidence scaled from gamma[0] to gamma[1]")
    step_schedule: Literal["ascending"] | None = Field(None, description="decoder option (extra): 2^k tokens "
                                                       "committed at step k of each block")


class CJGRPOConfig(PolicyGradientConfig):
    advantage: AdvantageName = "mean_baseline"
    clip_low: float = 0.5
    clip_high: float = 0.5
    clip_c: float | None = None
    beta: float = 0.04
    inner_steps: int = 12
    count_padding: bool = True
    reduction: Literal["transition", "step_pooled", "auto"] = Field(
        "transition", description="equal weight per transition (Eq. 11) or per step pooled over the micro-batch "
        "(auto: step_pooled for masked diffusion, transition for block models, as DARE)")
    eos_gamma: tuple[float, float] | None = Field((0.01, 1.0), description="EOS early rejection: stop-token "
                                                  "confidence scaled from gamma[0] to gamma[1] (None: off)")
    step_schedule: Literal["uniform", "ascending"] = Field("ascending", description="tokens per decoding step")
    ascending_steps: int | None = Field(None, ge=1, description="steps per block with the ascending schedule "
                                        "(None: the most it allows, about log2 of the block length)")
    full_diffusion: bool = Field(True, description="masked diffusion rollouts decode the canvas as one block")


@algorithm("cj_grpo", aliases=("cj-grpo",))
class CJGRPO(Algorithm):
    """Clipped GRPO on exact per-step likelihoods replayed from the rollout's step map, each step weighted
    equally, rolled out with EOS early rejection and ascending step sizes."""

    needs = Needs(rollout=True, trajectory=True)
    Config = CJGRPOConfig
    RolloutAdditions = CJGRPORollout
    policy_loss = "token_ppo"
    default_estimator = {"bidirectional": "mdm_trajectory", "block_causal": "block_trajectory"}

    def bind(self, attention: str) -> Estimator:
        self.attention = attention
        return super().bind(attention)

    def rollout_additions(self, decoding, arch) -> CJGRPORollout:
        cfg = self.config
        if (cfg.eos_gamma is not None or cfg.step_schedule != "uniform") and \
                arch.decoding_family not in _SCHEDULE_DECODERS:
            raise ConfigError(f"CJ-GRPO's EOS early rejection and ascending steps are implemented for the "
                              f"{' and '.join(_SCHEDULE_DECODERS)} decoders, not {arch.decoding_family!r}; "
                              "use --algo cj_grpo_dare or --set algo.eos_gamma=null --set algo.step_schedule=uniform")
        out = {}
        block = decoding.block_length
        if cfg.full_diffusion and arch.attention == "bidirectional":
            block = out["block_length"] = decoding.gen_length
        if cfg.eos_gamma is not None:
            out["eos_gamma"] = cfg.eos_gamma
        if cfg.step_schedule == "ascending":
            out["step_schedule"] = "ascending"
            out["steps"] = (cfg.ascending_steps or max_ascending_steps(block)) * (decoding.gen_length // block)
        return CJGRPORollout(**out)

    def loss_mask(self, batch: RolloutBatch) -> torch.Tensor:
        return batch.completion_mask & (batch.commit_step >= 0)

    def reduce(self, token_loss: torch.Tensor, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
        """Token weights (B, T) per ``reduction``, and the micro-batch's weight for exact accumulation."""
        kind = self.config.reduction
        if kind == "auto":
            kind = "step_pooled" if getattr(self, "attention", "bidirectional") == "bidirectional" else "transition"
        if kind == "step_pooled":
            weights, weight = step_pooled_weights(batch.commit_step, mask), 1.0
        else:
            rows = float(mask.any(-1).sum())
            weights, weight = transition_weights(batch.commit_step, mask) / max(rows, 1.0), rows
        return (token_loss * weights.to(token_loss.dtype)).sum(), weight

    def loss(self, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
        out = super().loss(policy, batch, inner_step)
        mask = self.loss_mask(batch)
        out.metrics["transitions"] = float(len(torch.unique(batch.commit_step[mask]))) if mask.any() else 0.0
        return out
