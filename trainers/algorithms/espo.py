"""ESPO, ELBO-based Sequence-level Policy Optimization (ML-GSAI/ESPO; yjyddq/DARE llada_dp_actor_espo.py).
Masked diffusion only.

The likelihood is the ``espo_elbo`` sequence ELBO over the whole completion (2 draws stratified across the
batch's rows, each averaged with its complementary corruption) normalised per token: s = ELBO / L
(ML-GSAI/ESPO espo/espo_trainer.py ``compute_loss``: ``exp((logp - old) / logits_to_keep)``). One sequence ratio rho = exp(s - s_old) with plain clipped
PPO (no dual clip), loss = mean over sequences of max(-A rho, -A clip(rho, 1 +- eps)); KL k2 on the raw
ELBOs divided by L: beta (ELBO - ELBO_ref)^2 / (2 L). RLOO advantages; 8 inner updates per rollout batch,
each on its own precomputed draws (so the ratio leaves 1 from the second). Recipe values per task: math
beta 1e-3, code 1e-2, Countdown 3e-3 with eps 0, Sudoku 1e-2 (defaults here: math's).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from ..api import Needs, algorithm
from ..ops import clip_surrogate, safe_exp
from .policy_gradient import AdvantageKind, PolicyGradientConfig
from .sequence_ratio import SequenceRatio


class ESPOConfig(PolicyGradientConfig):
    estimator: str = "espo_elbo"
    estimator_args: dict = Field(default_factory=lambda: {"samples": 2, "reduce_var": True})
    advantage: AdvantageKind = "rloo"
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
class ESPO(SequenceRatio):
    """Clipped PPO on the sequence ratio of per-token-normalised ELBOs, k2 KL on the raw ELBOs."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = ESPOConfig
    default_estimator = {"bidirectional": "espo_elbo"}

    def length(self, mask: torch.Tensor) -> float:
        return float(self.config.normalise_length or mask.shape[1])

    def surrogate(self, log_ratio: torch.Tensor, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return clip_surrogate(safe_exp(log_ratio), adv, self.config.clip_low, self.config.clip_high, None)
