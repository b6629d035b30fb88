"""``dpo``: DPO on ELBO estimates of (prompt, chosen, rejected) pairs (DPO; VRPO, LLaDA 1.5).

Per pair: -log sigmoid(beta [(B_theta(y_w) - B_ref(y_w)) - (B_theta(y_l) - B_ref(y_l))]) with B the
estimator's token estimates summed over ``completion_mask`` (divided by ``normalise_length`` when set), averaged
over pairs. Rows come in (chosen, rejected) pairs; the reference log-probs are the trainer's ``ref_logp`` on
the same noise set (``shared_noise``) or on the set after it (independent reference noise).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dare.harness.errors import ConfigError

from ..batch import LossOutput, RolloutBatch
from . import policy_loss


def noise_sets(algo, batch: RolloutBatch, inner_step: int) -> tuple[int, int]:
    """(policy set, reference set) of this inner step: the same set with shared noise, else (2k, 2k + 1)."""
    if algo.config.shared_noise:
        k = inner_step % len(batch.noise)
        return k, k
    k = inner_step % (len(batch.noise) // 2)
    return 2 * k, 2 * k + 1


def sequence_elbo(algo, token_logp: torch.Tensor, batch: RolloutBatch) -> torch.Tensor:
    """(B, T) token estimates -> (B,) sequence ELBOs over ``completion_mask`` (divided by normalise_length)."""
    elbo = (token_logp * batch.completion_mask.to(token_logp.dtype)).sum(-1)
    length = algo.config.normalise_length
    return elbo / length if length else elbo


@policy_loss("dpo")
def dpo(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """The DPO loss on ELBO differences to the reference, mean over pairs."""
    groups = batch.group_ids
    if batch.size % 2 or not torch.equal(groups[0::2], groups[1::2]):
        raise ConfigError("a preference micro-batch must hold whole (chosen, rejected) pairs; "
                          "set micro_batch_size to an even number")
    policy_set, ref_set = noise_sets(algo, batch, inner_step)
    est = algo.estimator.estimate(policy, batch, batch.noise[policy_set])
    elbo = sequence_elbo(algo, est.token_logp, batch)
    ref = sequence_elbo(algo, batch.ref_logp[ref_set].to(elbo.dtype), batch)
    reward = algo.config.beta * (elbo - ref)  # implicit reward (B,)
    margin = reward[0::2] - reward[1::2]  # (pairs,)
    loss = -F.logsigmoid(margin).mean()
    detached = margin.detach()
    metrics = {
        "dpo_loss": float(loss.detach()),
        "reward_margin": float(detached.mean()),
        "preference_accuracy": float((detached > 0).float().mean()),
        "chosen_reward": float(reward[0::2].detach().mean()),
        "rejected_reward": float(reward[1::2].detach().mean()),
        "chosen_elbo": float(elbo[0::2].detach().mean()),
        "rejected_elbo": float(elbo[1::2].detach().mean()),
    }
    return LossOutput(loss=loss, weight=float(margin.numel()), metrics=metrics)
