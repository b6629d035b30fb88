"""ESPO, ELBO-based Sequence-level Policy Optimization (ML-GSAI/ESPO; yjyddq/DARE llada_dp_actor_espo.py).
Masked diffusion only.

Objective, per rollout (``sequence_ppo``): s = ELBO / L with the ``espo_elbo`` sequence ELBO over the whole
completion (2 draws stratified across the batch's rows, each averaged with its complementary corruption) and
L the padded response length (ML-GSAI/ESPO espo/espo_trainer.py ``compute_loss``: ``exp((logp - old) /
logits_to_keep)``); one sequence ratio rho = exp(s - s_old); loss = mean over sequences of
max(-A rho, -A clip(rho, 1 +- eps)) (no dual clip) + beta (ELBO - ELBO_ref)^2 / (2 L) (k2 on the raw ELBOs).
A: RLOO. 8 inner updates per rollout batch, each on its own precomputed draws (so the ratio leaves 1 from
the second). Recipe values per task: math beta 1e-3, code 1e-2, Countdown 3e-3 with eps 0, Sudoku 1e-2
(defaults here: math's).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..advantages import AdvantageName
from ..api import Algorithm, Needs, algorithm
from ..losses.ppo import PolicyGradientConfig


class ESPOConfig(PolicyGradientConfig):
    estimator_args: dict = Field(default_factory=lambda: {"samples": 2, "reduce_var": True})
    advantage: AdvantageName = "rloo"
    clip_c: float | None = Field(None, gt=1, description="ESPO has no dual clip")
    beta: float = 1e-3
    kl_estimator: Literal["k1", "k2", "k3"] = "k2"
    inner_steps: int = 8
    resample_noise: bool = True
    count_padding: bool = Field(True, description="score the whole completion, the tail after EOS included "
                                "(ESPO's ELBO runs over all logits_to_keep positions)")
    normalise_length: int | None = Field(None, ge=1, description="L of s = ELBO / L; None: the batch's padded "
                                         "response length (DARE max_response_length)")


@algorithm("espo")
class ESPO(Algorithm):
    """Clipped PPO on the sequence ratio of per-token-normalised ELBOs, k2 KL on the raw ELBOs."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = ESPOConfig
    policy_loss = "sequence_ppo"
    default_estimator = "espo_elbo"
