"""Preference optimisation of diffusion LMs on (prompt, chosen, rejected) pairs: DPO and VRPO (LLaDA 1.5).

Loss per pair: ``-log sigmoid(beta [(B_theta(y_w) - B_ref(y_w)) - (B_theta(y_l) - B_ref(y_l))])`` where B is an
ELBO estimate of log pi(y | x) (the estimator's token estimates summed over ``completion_mask``), averaged
over pairs. The reference is the frozen initial model, scored by the trainer before the update.

``vrpo``: VRPO's variance reduction. Budget ``samples = n`` ELBO draws per sequence, allocated to n
distinct, stratified timesteps with one mask each (``stratified_elbo`` / ``block_stratified_elbo``), and
the *same* draws for policy and reference (``shared_noise``, the paper's antithetic sampling), so
B_theta - B_ref has low variance. ``dpo``: the same loss with the plain Monte-Carlo ELBO (``mc_elbo`` /
``block_elbo``, one draw) and independent noise for the reference. DARE's VRPO divides every ELBO by the
padded response length (``normalise_length``, i.e. beta / L): preset ``vrpo_dare``.
"""

from __future__ import annotations

from pydantic import Field

from ..api import (
    Algorithm,
    AlgorithmConfig,
    Estimator,
    Needs,
    algorithm,
    build_estimator,
)


class PreferenceConfig(AlgorithmConfig):
    beta: float = Field(0.2, gt=0, description="DPO temperature on the ELBO differences (LLaDA 1.5 / DARE: 0.2)")
    samples: int = Field(4, ge=1, description="ELBO budget n per sequence (estimator draws; VRPO: distinct timesteps)")
    shared_noise: bool = Field(True, description="policy and reference score the same masks (VRPO antithetic "
                               "sampling); False: the reference gets an independent draw")
    normalise_length: int | None = Field(None, ge=1, description="divide every ELBO by this padded response "
                                         "length (DARE: max_response_length, i.e. beta / L); None: the paper's sum")
    pairs: str | None = Field(None, description="preference JSONL file; None: the suite's shipped "
                              "harness/data/<benchmark>_preference.jsonl")


class PreferenceOptimisation(Algorithm):
    """Base class of DPO-style losses on ELBO estimates (``dpo``); subclasses choose defaults and estimators."""

    needs = Needs(rollout=False, rewards=False, reference=True, pairs=True)
    Config = PreferenceConfig
    policy_loss = "dpo"

    def bind(self, attention: str) -> Estimator:
        """The configured estimator, with ``samples`` as its budget unless ``estimator_args`` sets one."""
        est = super().bind(attention)
        if "samples" in est.capabilities and "samples" not in self.config.estimator_args:
            self.estimator = build_estimator(est.name, {**self.config.estimator_args, "samples": self.config.samples})
        return self.estimator

    @property
    def num_noise_sets(self) -> int:
        """Independent reference noise needs a second draw per set: sets (2k, 2k + 1) = (policy, reference)."""
        base = super().num_noise_sets
        return base if self.config.shared_noise else 2 * base


class VRPOConfig(PreferenceConfig):
    samples: int = Field(4, ge=1, description="ELBO budget n: n stratified timesteps, one mask each (DARE mc_num 4)")


class DPOConfig(PreferenceConfig):
    samples: int = Field(1, ge=1, description="ELBO draws per sequence (plain DPO: 1)")
    shared_noise: bool = Field(False, description="policy and reference score the same masks (False: plain DPO)")


@algorithm("vrpo")
class VRPO(PreferenceOptimisation):
    """VRPO (LLaDA 1.5): DPO on stratified ELBOs, n timesteps x 1 mask, noise shared with the reference."""

    Config = VRPOConfig
    default_estimator = {"bidirectional": "stratified_elbo", "block_causal": "block_stratified_elbo"}


@algorithm("dpo")
class DPO(PreferenceOptimisation):
    """DPO on plain Monte-Carlo ELBOs (one draw, independent reference noise): VRPO's baseline."""

    Config = DPOConfig
    default_estimator = {"bidirectional": "mc_elbo", "block_causal": "block_elbo"}
