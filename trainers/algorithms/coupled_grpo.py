"""Coupled-GRPO (DiffuCoder, Gong et al. 2025; apple/ml-diffucoder ``src/open_r1/coupled_grpo.py``).

Objective, per token i of a rollout y (``token_ppo``)::

    l_i = max(-A r_i, -A clip(r_i, 1 - 0.5, 1 + 0.5)) + 0.01 k3(log p_i - log p_ref,i),   r_i = p_i / p_old,i
    loss = token mean of l_i over the batch's counted tokens (the tail after EOS masked)

with log p_i the ``coupled`` estimate: (log p under the full mask + [log p / t on z1's mask, log p / (1 - t)
on its complement z2]) / 2, one t ~ U(0.2, 0.8) per draw (``forward_process``, ``selective_log_softmax``),
and A the leave-one-out baseline r_j - mean_{k != j} r_k (``rloo``, no std). 2 inner updates with fresh
masks (``recipes/config_coupled_code.yaml``). DARE (configs/algorithms/coupled_grpo_dare.yaml): GRPO std,
clip 0.2, no KL, one update, and the mask seed fixed to 42 at every step.
"""

from __future__ import annotations

from ..advantages import AdvantageName
from ..api import Algorithm, Needs, algorithm
from ..losses.ppo import PolicyGradientConfig


class CoupledGRPOConfig(PolicyGradientConfig):
    advantage: AdvantageName = "rloo"
    clip_low: float = 0.5
    clip_high: float = 0.5
    beta: float = 0.01
    inner_steps: int = 2
    resample_noise: bool = True


@algorithm("coupled_grpo", aliases=("coupled-grpo",))
class CoupledGRPO(Algorithm):
    """Clipped GRPO whose token log-likelihoods come from complementary mask pairs plus a full mask."""

    needs = Needs(rollout=True, trajectory=False)
    Config = CoupledGRPOConfig
    policy_loss = "token_ppo"
    default_estimator = "coupled"
