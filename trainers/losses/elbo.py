"""``negative_elbo``: supervised fine-tuning of diffusion LMs, the negative ELBO of (prompt, response) pairs.

loss = -(sum over counted tokens of the estimator's 1/t-weighted token log-likelihoods) / count, with count
the response tokens (the papers, ``normalise: response_tokens``) or the masked tokens per draw (DARE's LLaDA
trainer, ``masked_tokens``).
"""

from __future__ import annotations

from ..batch import LossOutput, RolloutBatch
from . import policy_loss


@policy_loss("negative_elbo")
def negative_elbo(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """The negative ELBO / count (``algo.config.normalise``)."""
    noise = batch.noise[inner_step % len(batch.noise)]
    est = algo.estimator.estimate(policy, batch, noise)
    mask = batch.completion_mask
    total = -(est.token_logp * mask).sum()
    if algo.config.normalise == "masked_tokens":
        count = float((noise["masked"].to(mask.device) & mask[:, None, :]).sum()) / noise["masked"].shape[1]
    else:
        count = float(mask.sum())
    count = max(count, 1.0)
    loss = total / count
    metrics = {"sft_loss": float(loss.detach()), "response_tokens": float(mask.sum())}
    return LossOutput(loss=loss, weight=count, metrics=metrics)
