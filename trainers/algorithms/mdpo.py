"""MDPO (Masked Diffusion Policy Optimization): policy gradient on the denoising steps themselves.

For every decoding step t of a rollout the model's clean prediction x̂0_t (from the state x_t before the
step) is graded with the task's verifier, R[b, t]. Step scores s_t = (R_t - R_{t-1} + 1) + mean_{k>t} R_k
(R_0 = 0; the last step's mean is R_T) are normalised per prompt group and per step (unbiased std + 1e-4);
the K steps with the largest sum over the batch of |Â| are trained. Per chosen (row, step), on the
positions masked in x_t: l_i = λ_t max(-Â r_i, -Â clip(r_i)) + β KL_i with r_i = p(x̂0_i | x_t) / p_old,
λ_t = L / #masked(x_t); per (row, step) loss Σ l_i c_{t,i} / #masked (c: the prediction's confidence).

Defaults from autonomousvision/mdpo (src/open_r1/mdpo/mdpo_trainer.py ``compute_loss``,
``split_into_micro_batches``; recipes/LLaDA-Instruct/mdpo/config_demo.yaml): clip 0.2, K = 16, one micro-batch
per trained step (its token mean, then the mean over them), rollouts, x̂0_t and training log-probs at
temperature 0.1 (logits / T), x̂0_t sampled from the tempered categorical with confidence p_T(x̂0), step
advantages with std + 1e-4, β = 0 (math recipe; k2 (ℓ_ref - ℓ)² / 2 when set), one update per batch.
configs/algorithms/mdpo_dare.yaml keeps this package's earlier choices (pooled token mean, T = 1, argmax).
Masked diffusion models only (LLaDA, Dream). Shapes: B rows, S steps, K chosen steps, T tokens.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field

from dare.harness.registry import estimators

from ..advantages import grpo_advantages
from ..api import Algorithm, AlgorithmConfig, Needs, RolloutAdditions, algorithm
from ..batch import RolloutBatch
from ..estimators.step_prediction import StepTargets, step_predictions


def step_scores(step_rewards: torch.Tensor) -> torch.Tensor:
    """s_t = (R_t - R_{t-1} + 1) + mean_{k>t} R_k with R_0 = 0 and R_T for the last step: (B, S) -> (B, S)."""
    r = step_rewards.double()
    gain = r - torch.cat([torch.zeros_like(r[:, :1]), r[:, :-1]], 1) + 1
    later = r.flip(1).cumsum(1).flip(1) - r  # sum over k > t
    count = torch.arange(r.shape[1] - 1, -1, -1, device=r.device, dtype=r.dtype)  # number of k > t
    future = torch.where(count > 0, later / count.clamp(min=1), r[:, -1:].expand_as(r))
    return (gain + future).to(step_rewards.dtype)


def step_advantages(scores: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Group-normalised per step (each column separately, unbiased std + eps): (B, S) -> (B, S)."""
    return torch.stack([grpo_advantages(scores[:, t], group_ids, eps) for t in range(scores.shape[1])], 1)


def select_steps(advantages: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` steps with the largest Σ_b |Â_{b,t}|, in increasing order: (B, S) -> (min(k, S),) long."""
    k = min(k, advantages.shape[1])
    return advantages.abs().sum(0).topk(k).indices.sort().values


class MDPORollout(RolloutAdditions):
    """MDPO's rollouts sample at its temperature (the math recipe's 0.1), as x̂0_t and the log-probs do."""

    temperature: float = Field(description="rollout sampling temperature: the algorithm's ``temperature``")


class MDPOConfig(AlgorithmConfig):
    clip_low: float = Field(0.2, ge=0)
    clip_high: float = Field(0.2, ge=0)
    beta: float = Field(0.0, ge=0, description="KL coefficient against the frozen reference model (recipes: 0 "
                        "math, 0.01 code; MDPOConfig's field default 0.04)")
    kl_estimator: Literal["k1", "k2", "k3"] = "k2"
    temperature: float = Field(0.1, gt=0, description="sampling temperature of the rollouts and of x̂0_t; the "
                               "training log-probs divide the logits by it (math recipe: 0.1)")
    predictions: Literal["sample", "argmax"] = Field(
        "sample", description="x̂0_t at positions step t did not commit: a draw from the tempered categorical "
        "(MDPO's diffusion_generate) or the argmax")
    reduction: Literal["step", "pooled"] = Field(
        "step", description="step: token mean per trained (row, step), averaged over them (MDPO: one micro-batch "
        "per step); pooled: one token mean over every (row, step) pair")
    train_steps: int = Field(16, ge=1, description="decoding steps trained per batch (sample_train_steps)")
    confidence_weighting: bool = Field(True, description="weight each token's loss by the prediction's confidence")
    prediction_chunk: int = Field(8, ge=1, description="(row, step) states per forward when predicting x̂0_t")
    advantage_eps: float = Field(1e-4, gt=0, description="std + eps of the step advantages (MDPO: 1e-4)")
    count_padding: bool = True  # the official mask: every position masked in x_t


@algorithm("mdpo")
class MDPO(Algorithm):
    """Clipped policy gradient (``step_ppo``) on the clean predictions of intermediate denoising states; its
    own: ``prepare`` grades every step's prediction and chooses the steps to train."""

    needs = Needs(rollout=True, trajectory=True, attention="bidirectional")
    Config = MDPOConfig
    RolloutAdditions = MDPORollout
    policy_loss = "step_ppo"
    default_estimator = "step_prediction"

    def estimator_options(self, name: str) -> dict[str, Any]:
        options = super().estimator_options(name)
        if "temperature" in estimators.get(name).Options.model_fields:
            options.setdefault("temperature", self.config.temperature)
        return options

    def rollout_additions(self, decoding, arch) -> MDPORollout:
        return MDPORollout(temperature=self.config.temperature)

    def prepare(self, policy, batch: RolloutBatch, scorer) -> None:
        """Grade x̂0_t of every step, form step advantages, choose the K steps to train (``batch.extras["mdpo"]``,
        a :class:`~dare.trainers.estimators.step_prediction.StepTargets`)."""
        cfg = self.config
        here = batch.completion_ids.device  # the verl driver keeps batches on the CPU: predict on the policy's device
        temperature = cfg.temperature if cfg.predictions == "sample" else None
        # the draws of x̂0_t depend only on the batch, so a resumed run repeats them
        seed = int((batch.completion_ids.long() * torch.arange(1, batch.completion_ids.shape[1] + 1,
                                                               device=here)).sum()) % (2 ** 31)
        preds, conf = step_predictions(policy, batch.to(policy.device), cfg.prediction_chunk, temperature, seed)
        preds, conf = preds.to(here), conf.to(here)
        b, s, t = preds.shape
        rows = torch.arange(b).repeat_interleave(s)
        rewards = scorer(rows, preds.reshape(b * s, t).cpu()).view(b, s).to(here)
        adv = step_advantages(step_scores(rewards), batch.group_ids, cfg.advantage_eps)
        chosen = select_steps(adv, cfg.train_steps)
        batch.extras["mdpo"] = StepTargets(steps=chosen.expand(b, -1).clone(), targets=preds[:, chosen],
                                           confidence=conf[:, chosen], advantages=adv[:, chosen].float(),
                                           step_reward_first=float(rewards[:, 0].mean()),
                                           step_reward_last=float(rewards[:, -1].mean()))
