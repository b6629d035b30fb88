"""d1 / diffu-GRPO (Zhao et al. 2025; dllm-reasoning/d1 ``diffu-grpo/diffu_grpo_trainer.py`` ``compute_loss``).

Objective, per token i of a rollout y (``token_ppo``)::

    l_i = max(-A r_i, -A clip(r_i, 1 - 0.5, 1 + 0.5)) + 0.04 k3(log p_i - log p_ref,i),   r_i = p_i / p_old,i
    loss = token mean of l_i over the batch's counted tokens (the tail after EOS masked)

with log p_i the ``one_step`` estimate log p(y_i | prompt masked with p = 0.15, response fully masked) and
A = r - mean of the prompt's group (``mean_baseline``, no std). 12 inner updates, a fresh prompt mask for
each (dllm-reasoning/d1 ``slurm_scripts/train.yaml``). DARE's choices (std-normalised GRPO, clip 0.2 with
dual clip 3, no KL, one update, one mask per batch, padding counted) are configs/algorithms/d1_dare.yaml.
"""

from __future__ import annotations

from pydantic import Field

from ..advantages import AdvantageName
from ..api import Algorithm, Needs, algorithm
from ..losses.ppo import PolicyGradientConfig


class D1Config(PolicyGradientConfig):
    estimator_args: dict = Field(default_factory=lambda: {"prompt_mask_prob": 0.15})
    advantage: AdvantageName = "mean_baseline"
    clip_low: float = 0.5
    clip_high: float = 0.5
    beta: float = 0.04
    inner_steps: int = 12
    resample_noise: bool = True


@algorithm("d1", aliases=("diffu_grpo",))
class D1(Algorithm):
    """diffu-GRPO: token-level clipped GRPO on log p(y_i | prompt partly masked, response fully masked)."""

    needs = Needs(rollout=True, trajectory=False)
    Config = D1Config
    policy_loss = "token_ppo"
    default_estimator = "one_step"
