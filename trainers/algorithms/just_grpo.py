"""JustGRPO (treat the dLLM as autoregressive; yjyddq/DARE llada_dp_actor_justgrpo.py): GRPO on the exact
left-to-right likelihood of a masked diffusion model.

Rollouts decode one token per step, strictly left to right (block length 1, steps = response length), so
the likelihood of a completion is exact and needs no recorded step map: position t is scored on the prompt,
y_<t and masks after it (``autoregressive``: one full-canvas forward per token), with the logits divided by
the sampling temperature, as the rollout drew them. Defaults from LeapLabTHU/JustGRPO (grpo.py ``sample``,
``logprob_loss``, ``compute_group_advantages``): temperature 1.0 for rollouts and log-probs, every
gen_length position scored (no EOS mask: ``count_padding``), PPO per token with eps 0.2 and no dual clip,
advantages (r - mean) / (std + 1e-4), the summed token losses divided by gen_length x the number of
samples with a nonzero advantage, one update per batch (the ratio is against the detached current policy),
no KL. Masked diffusion only.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field, model_validator

from dare.harness.errors import ConfigError
from dare.harness.registry import estimators

from ..api import Algorithm, Needs, RolloutAdditions, algorithm
from ..batch import RolloutBatch
from ..losses.ppo import PolicyGradientConfig


class JustGRPORollout(RolloutAdditions):
    """JustGRPO's rollouts: strictly left to right, one token per step, at the likelihood's temperature."""

    block_length: int = Field(1, description="one token per block: left to right")
    steps: int = Field(description="one step per token: the evaluation's gen_length")
    temperature: float = Field(description="sampling temperature, the algorithm's (the likelihood divides "
                               "the logits by it)")


class JustGRPOConfig(PolicyGradientConfig):
    temperature: float = Field(1.0, gt=0, description="rollout sampling temperature; the likelihood divides "
                               "the logits by it")
    advantage_eps: float = Field(1e-4, gt=0)
    normalise: Literal["valid_samples", "tokens"] = Field(
        "valid_samples", description="valid_samples: summed token losses / (gen_length x samples with A != 0) "
        "(JustGRPO); tokens: the token mean over the batch (DARE's verl loss)")
    count_padding: bool = Field(True, description="score all gen_length positions (JustGRPO has no EOS mask)")

    @model_validator(mode="after")
    def _one_temperature(self) -> JustGRPOConfig:
        if "temperature" in self.estimator_args:
            raise ValueError("set algo.temperature (it drives the rollouts and the likelihood together), "
                             "not estimator_args.temperature")
        return self


@algorithm("just_grpo", aliases=("justgrpo",))
class JustGRPO(Algorithm):
    """Clipped GRPO (``token_ppo``) on exact autoregressive log-probs of left-to-right rollouts (masked
    diffusion); its own: the valid-samples normalisation, the rollout settings and their check."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = JustGRPOConfig
    RolloutAdditions = JustGRPORollout
    policy_loss = "token_ppo"
    default_estimator = "autoregressive"

    def reduce(self, token_loss: torch.Tensor, batch: RolloutBatch, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
        """sum of the token losses / (gen_length x samples with A != 0); the weight is that denominator, so
        micro-batches combine to the batch's (``scale = gain / gen_length / valid_samples``)."""
        if self.config.normalise == "tokens":
            return super().reduce(token_loss, batch, mask)
        valid = float((batch.advantages != 0).sum())
        weight = float(token_loss.shape[1]) * valid
        return (token_loss * mask).sum() / max(weight, 1e-8), weight

    def estimator_options(self, name: str) -> dict[str, Any]:
        options = super().estimator_options(name)
        if "temperature" in estimators.get(name).Options.model_fields:
            options["temperature"] = self.config.temperature
        return options

    def rollout_additions(self, decoding, arch) -> JustGRPORollout:
        return JustGRPORollout(steps=decoding.gen_length, temperature=self.config.temperature)

    def check_rollout(self, decoding) -> None:
        left_to_right = decoding.block_length == 1 and decoding.steps == decoding.gen_length
        exact_if_ordered = "left_to_right" in estimators.get(self.estimator_name("bidirectional")).capabilities
        if exact_if_ordered and not left_to_right:
            raise ConfigError(f"JustGRPO's likelihood is exact only for left-to-right rollouts (block_length 1, "
                              f"steps = gen_length), got block_length {decoding.block_length}, steps "
                              f"{decoding.steps}; drop the rollout.block_length / rollout.steps overrides")
        if decoding.temperature != self.config.temperature:
            raise ConfigError(f"JustGRPO scores tokens at temperature {self.config.temperature} but the rollouts "
                              f"sample at {decoding.temperature} (rollout.temperature); set "
                              f"rollout.temperature={self.config.temperature} (JustGRPO's own value is 1.0), or "
                              f"set algo.temperature={decoding.temperature} instead of rollout.temperature")
