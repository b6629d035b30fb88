"""Supervised fine-tuning of diffusion LMs: the negative ELBO of (prompt, response) pairs (``negative_elbo``).

Masked diffusion (LLaDA, Dream; ``mc_elbo``): t ~ U(eps, 1), each response token masked with probability t,
loss = sum over masked tokens of CE / t. Block diffusion (SDAR, LLaDA2; ``block_elbo``): the same on the
``[noisy | clean]`` pair with the block attention mask. The papers divide by the response length
(``normalise: response_tokens``); DARE's LLaDA trainer divides by the number of masked tokens
(``masked_tokens``). For masked-diffusion models the EOS right-padding is trained (the model learns to end);
block-diffusion batches exclude padding from attention and loss (see :mod:`dare.trainers.training.data`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..api import Algorithm, AlgorithmConfig, Needs, algorithm


class SFTConfig(AlgorithmConfig):
    normalise: Literal["response_tokens", "masked_tokens"] = Field(
        "response_tokens",
        description="divide the summed weighted CE by response tokens (papers) or masked tokens (DARE)")
    count_padding: bool = Field(True, description="masked diffusion: train the EOS right-padding (LLaDA SFT)")


@algorithm("sft")
class SFT(Algorithm):
    """Negative ELBO on reference completions; the estimator follows the model (masked or block diffusion)."""

    needs = Needs(rollout=False, rewards=False)
    Config = SFTConfig
    policy_loss = "negative_elbo"
    default_estimator = {"bidirectional": "mc_elbo", "block_causal": "block_elbo"}
