"""wd1, weighted policy optimisation for diffusion LLMs (Tang et al. 2025; xiaohangt/wd1@0898985).

Objective (``weighted_likelihood``), per prompt group of rollouts y_b with advantages A_b = r_b - mean_group
(``mean_baseline``, no std; ``_generate_and_score_completions``)::

    loss = -sum_b softmax(A)_b S_b + sum_b softmax(-A)_b S_b,   S_b = sum_i log p(y_b,i | z)

with log p the ``one_step`` estimate of d1 (response fully masked, prompt masked with p = 0.15, a fresh
prompt mask per inner update: ``random_masking: True``), summed over the tokens up to the first EOS. No ratio,
clip or KL (``wd1/trainers/rev_grpo_trainer.py`` ``compute_loss``). 8 inner updates (``run/wll_NP_*.sh``
pass ``--num_iterations 8`` over ``wd1/train.yaml``'s 12). The positive term alone (``wll_P_*.sh``,
``rev_grpo_trainer_psr.py``) is ``negative: false``, preset ``wd1_pos_only``. The official softmax spans the
per-device micro-batch, one group under the shipped settings; ``weights_over: micro_batch`` reproduces it for
any micro-batch. The local trainer keeps the step's advantages beside the batch, so per-group weights span
the whole group however micro-batching cuts it; verl's workers see only the rows they are sent, so there a
micro-batch should hold whole groups (``micro_batch_size`` a multiple of ``group_size``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..advantages import AdvantageName
from ..api import Algorithm, AlgorithmConfig, Needs, algorithm
from ..losses.weighted import GROUP_ADVANTAGES


class WD1Config(AlgorithmConfig):
    estimator_args: dict = Field(default_factory=lambda: {"prompt_mask_prob": 0.15})
    advantage: AdvantageName = "mean_baseline"
    advantage_eps: float = Field(1e-6, gt=0)
    negative: bool = Field(True, description="subtract the softmax(-A)-weighted likelihood (wll_d1_neg); False: "
                           "the positive term only (wll_d1_pos_only)")
    weights_over: Literal["group", "micro_batch"] = Field(
        "group", description="rows the softmax weights normalise over: each prompt's group, or the whole "
        "micro-batch (the official dim 0 of the per-device batch)")
    inner_steps: int = 8
    resample_noise: bool = True


@algorithm("wd1")
class WD1(Algorithm):
    """Ratio-free: raise the softmax(A)-weighted, lower the softmax(-A)-weighted one-step log-likelihoods."""

    needs = Needs(rollout=True, trajectory=False)
    Config = WD1Config
    policy_loss = "weighted_likelihood"
    default_estimator = "one_step"

    def advantages(self, batch):
        """The registered advantages (B,), also kept with the group ids in ``batch.extras`` so that each
        micro-batch normalises its softmax weights over whole groups."""
        advantages = super().advantages(batch)
        batch.extras[GROUP_ADVANTAGES] = (batch.group_ids.clone(), advantages.detach().clone())
        return advantages
