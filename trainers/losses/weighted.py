"""``weighted_likelihood``: wd1's ratio-free weighted log-likelihood (xiaohangt/wd1@0898985
``wd1/trainers/rev_grpo_trainer.py`` ``RevDiffuGRPOTrainer.compute_loss``, trainer type ``wll_d1_neg``; the
positive term alone is ``rev_grpo_trainer_psr.py``, ``wll_d1_pos_only``).

Per row b: S_b = sum of the estimator's token log-likelihoods over the counted tokens (a sum: no division by
the length). Over a set of rows (a prompt's group, or the whole micro-batch: the official softmax runs over
dim 0 of the per-device batch, which the shipped settings make exactly one group of 6)::

    w+ = softmax(A),  w- = softmax(-A),  loss_set = -sum_b w+_b S_b + sum_b w-_b S_b   (negative term optional)

No ratio, no clipping, no KL (the YAML's beta and epsilon are never read). The loss is the mean over the sets
(the official gradient accumulation averages its per-device batches); ``LossOutput.weight`` is their count. A
group's weights normalise over the whole group even when micro-batching splits it (the step's advantages are in
``batch.extras``): otherwise a micro-batch of one row gives w+ = w- = 1 and a loss of exactly 0.
Shapes: B rows, T completion tokens.
"""

from __future__ import annotations

import torch

from ..batch import LossOutput, RolloutBatch
from ..ops import masked_mean
from . import policy_loss


def set_softmax(values: torch.Tensor, sets: torch.Tensor) -> torch.Tensor:
    """softmax of ``values`` (B,) within each set of equal ``sets`` ids (B,): (B,), summing to 1 per set."""
    out = torch.empty_like(values)
    for s in torch.unique(sets):
        rows = sets == s
        out[rows] = torch.softmax(values[rows], 0)
    return out


def group_softmax(values: torch.Tensor, groups: torch.Tensor, all_values: torch.Tensor, all_groups: torch.Tensor
                  ) -> torch.Tensor:
    """softmax weight of each row's ``values`` (B,) within its whole group: the normaliser runs over every row of
    the step's batch with the same group id (``all_values``, ``all_groups``: (N,)), so a micro-batch that holds
    part of a group weights its rows as the whole group would."""
    out = torch.empty_like(values)
    for g in torch.unique(groups):
        normaliser = torch.logsumexp(all_values[all_groups == g].to(values), 0)
        rows = groups == g
        out[rows] = torch.exp(values[rows] - normaliser)
    return out


#: ``batch.extras`` key of the whole step's (group_ids (N,), advantages (N,)), set by wd1's ``advantages``
GROUP_ADVANTAGES = "group_advantages"


def _weights(batch: RolloutBatch, adv: torch.Tensor, over: str) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(w+ (B,), w- (B,), sets in this micro-batch): per group over the whole group when the step's batch is
    known (a group split across micro-batches counts as the share of its rows here), else over the rows here."""
    full = batch.extras.get(GROUP_ADVANTAGES)
    if over == "group" and full is not None:
        groups, values = full
        sizes = torch.stack([(groups == g).sum() for g in batch.group_ids]).to(adv)
        return (group_softmax(adv, batch.group_ids, values, groups),
                group_softmax(-adv, batch.group_ids, -values, groups), float((1.0 / sizes).sum()))
    sets = batch.group_ids if over == "group" else torch.zeros_like(batch.group_ids)
    return set_softmax(adv, sets), set_softmax(-adv, sets), float(torch.unique(sets).numel())


@policy_loss("weighted_likelihood")
def weighted_likelihood(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """wd1: -softmax(A)-weighted plus softmax(-A)-weighted sequence log-likelihood sums, per set, then their mean."""
    cfg = algo.config
    k = inner_step % len(batch.noise)
    est = algo.estimator.estimate(policy, batch, batch.noise[k])
    mask = algo.loss_mask(batch)
    sequence = (est.token_logp * mask).sum(-1)  # S_b (B,)
    adv = batch.advantages.to(sequence.dtype)
    positive, negative, count = _weights(batch, adv, cfg.weights_over)
    loss_rows = -positive * sequence
    if cfg.negative:
        loss_rows = loss_rows + negative * sequence
    loss = loss_rows.sum() / count
    metrics = {
        "policy_loss": float(loss.detach()),
        "sequence_logp": float(sequence.detach().mean()),
        "weight_max": float(positive.detach().max()),
        "entropy": float(masked_mean(est.entropy, mask)) if est.entropy is not None else 0.0,
    }
    return LossOutput(loss=loss, weight=count, metrics=metrics)
