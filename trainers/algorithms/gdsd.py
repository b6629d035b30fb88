"""GDSD, guided denoiser self-distillation (GaryBall/GDSD@3fb6780, arXiv 2605.29398). Masked diffusion only.

Objective (``denoiser_regression``): regress the clamped, length-normalised log-ratio of the ``coupled_denoiser``
likelihood (a stratified mask and its complement, no 1/p) onto psi x A with a squared loss, plus beta x k2 of the
raw sequence sums against the reference (``gdsd/trainers/gdsd_trainer_batchll.py`` ``compute_loss``,
``forward_process``, ``_compute_denoise_probs_from_masked_batch``). The complement pass is always on
(``compute_loss`` calls with ``reduce_var=True`` whatever the YAML says). Advantages: leave-one-out
r - mean_others, no std (``scale_rewards: false``). Defaults from ``scripts/train_gdsd.yaml``: eps 4e-4 (both
sides), beta 1e-3, psi 1 (the gsm8k script: 10), num_mc 1, 8 inner updates each on its own masks with old
log-probs precomputed per update; the whole padded completion is scored (L = ``logits_to_keep``). GDSD-TLC
(``gdsd_trainer_tlc.py``, preset ``gdsd_tlc``): the same loss on the halves weighted by 1 / their mask rate.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..advantages import AdvantageName
from ..api import Algorithm, AlgorithmConfig, Needs, algorithm


class GDSDConfig(AlgorithmConfig):
    clip_low: float = Field(4e-4, ge=0, lt=1, description="the log-ratio is clamped to >= log(1 - clip_low)")
    clip_high: float = Field(4e-4, ge=0, description="the log-ratio is clamped to <= log(1 + clip_high)")
    psi: float = Field(1.0, description="scale of the advantage the log-ratio / L regresses onto")
    beta: float = Field(1e-3, ge=0, description="coefficient of the k2 term against the reference (/ n L)")
    kl_estimator: Literal["k1", "k2", "k3"] = "k2"
    advantage: AdvantageName = "rloo"
    advantage_eps: float = Field(1e-4, gt=0)
    inner_steps: int = 8
    resample_noise: bool = True
    count_padding: bool = Field(True, description="score the whole padded completion (GDSD's logits_to_keep)")


@algorithm("gdsd")
class GDSD(Algorithm):
    """Squared regression of the clamped coupled-denoiser log-ratio / L onto psi A, k2 to the reference."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = GDSDConfig
    policy_loss = "denoiser_regression"
    default_estimator = "coupled_denoiser"
