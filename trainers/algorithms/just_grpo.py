"""JustGRPO (treat the dLLM as autoregressive; yjyddq/DARE llada_dp_actor_justgrpo.py): GRPO on the exact
left-to-right likelihood of a masked diffusion model.

Rollouts decode one token per step, strictly left to right (block length 1, steps = response length), so
the likelihood of a completion is exact and needs no recorded step map: position t is scored on the prompt,
y_<t and masks after it (``autoregressive``: one full-canvas forward per token), with the logits divided by
the sampling temperature, as the rollout drew them. Loss: dual-clip PPO per token (eps 0.2, c 3), GRPO
advantages, token mean, one update per batch (the ratio is taken against the detached current policy).
Defaults: temperature 0.6 (the recipe's rollout temperature, applied to the rollouts through the decoding
hook), no KL. Masked diffusion only.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import Field, model_validator

from dare.harness.errors import ConfigError
from dare.harness.registry import estimators

from ..api import Needs, algorithm
from .policy_gradient import PolicyGradient, PolicyGradientConfig


class JustGRPOConfig(PolicyGradientConfig):
    estimator: str = "autoregressive"
    estimator_args: dict = Field(default_factory=dict)
    temperature: float = Field(0.6, gt=0, description="rollout sampling temperature; the likelihood divides "
                               "the logits by it")

    @model_validator(mode="after")
    def _one_temperature(self) -> JustGRPOConfig:
        if "temperature" in self.estimator_args:
            raise ValueError("set algo.temperature (it drives the rollouts and the likelihood together), "
                             "not estimator_args.temperature")
        return self


@algorithm("just_grpo", aliases=("justgrpo",))
class JustGRPO(PolicyGradient):
    """Dual-clip GRPO on exact autoregressive log-probs of left-to-right rollouts (masked diffusion)."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = JustGRPOConfig
    default_estimator = {"bidirectional": "autoregressive"}

    def estimator_options(self, name: str) -> dict[str, Any]:
        options = super().estimator_options(name)
        if "temperature" in inspect.signature(estimators.get(name)).parameters:
            options["temperature"] = self.config.temperature
        return options

    def rollout_decoding(self, decoding, arch) -> dict[str, Any]:
        return {"block_length": 1, "steps": decoding.gen_length, "temperature": self.config.temperature}

    def check_rollout(self, decoding) -> None:
        left_to_right = decoding.block_length == 1 and decoding.steps == decoding.gen_length
        if self.config.estimator == "autoregressive" and not left_to_right:
            raise ConfigError(f"JustGRPO's likelihood is exact only for left-to-right rollouts (block_length 1, "
                              f"steps = gen_length), got block_length {decoding.block_length}, steps "
                              f"{decoding.steps}; drop the rollout.block_length / rollout.steps overrides")
        if decoding.temperature != self.config.temperature:
            raise ConfigError(f"JustGRPO scores tokens at temperature {self.config.temperature} but the rollouts "
                              f"sample at {decoding.temperature}; set algo.temperature={decoding.temperature} "
                              "instead of rollout.temperature")
