"""``segment_ppo``: d-TreeRPO's clipped objective on tree edges, with its self-distillation term.

Per segment (a parent -> child edge, one row): l = -Σ_i min(r_i A, clip(r_i, 1 ± ε) A) act_i / max(Σ act_i, 1)
+ β Σ_i k3_i act_i / max(Σ act_i, 1), rows averaged; r_i = exp(ℓ_i - ℓ_old,i) on the estimator's transition
log-probs, A the edge's local advantage, act the counted tokens (DARE also drops tokens whose new log-prob
is exactly 0, ``skip_zero_logp``). Self-distillation, for each group of siblings in the micro-batch with
positive advantages: weights w = softmax(A⁺ / τ_t) over the positive children; at every position one of them
decoded, q = the w-weighted histogram of their tokens there, and the term adds λ_t · mean over (group,
position) of KL(q ‖ p_θ(· | parent)) = Σ_v q_v (log(q_v + 1e-8) - log p_θ(v | parent)); λ_t = λ_max (e^{γ p}
- 1) / (e^γ - 1), τ_t = max(τ_max (1 - p)^β_τ, 1e-6), p = min(step / max_steps, 1). log p_θ(v | parent) is
the sibling's own transition log-prob (siblings share the parent canvas, so it is the same forward). As in
DARE, only siblings inside one micro-batch form a group; the tree rollout puts siblings in adjacent rows (with
trees = branch, a micro_batch_size that is a multiple of it keeps every group whole).
(yjyddq/DARE@83ae8a3 verl/workers/actor/llada_dp_actor_dtreerpo.py ``update_policy``,
``_compute_self_distillation_loss``.) Shapes: B segments, T completion tokens, n siblings.
"""

from __future__ import annotations

import math

import torch

from ..batch import LossOutput, RolloutBatch
from ..ops import clip_surrogate, kl_penalty, safe_exp
from . import policy_loss


def distillation_schedule(step: int, max_steps: int, lambda_max: float, gamma: float, tau_max: float,
                          tau_power: float) -> tuple[float, float]:
    """(λ_t, τ_t) at training step ``step`` of ``max_steps``."""
    progress = min(1.0, max(0.0, step / max(1, max_steps)))
    lam = lambda_max * (math.exp(gamma * progress) - 1.0) / (math.exp(gamma) - 1.0)
    return lam, max(tau_max * (1.0 - progress) ** tau_power, 1e-6)


def self_distillation(logp: torch.Tensor, tokens: torch.Tensor, active: torch.Tensor, advantages: torch.Tensor,
                      groups: torch.Tensor, tau: float) -> torch.Tensor:
    """Mean over (group, position) of KL(q ‖ p_θ(· | parent)) (a 0-d tensor, 0 when no group qualifies).

    logp (B, T) transition log-probs, tokens (B, T) the children, active (B, T) bool, advantages (B,),
    groups (B,): a group needs two rows in the micro-batch and one with A > 0."""
    total, count = logp.new_zeros(()), 0
    adv = torch.nan_to_num(advantages.detach().double(), nan=0.0, posinf=0.0, neginf=0.0)
    for g in torch.unique(groups):
        rows = (groups == g).nonzero()[:, 0]
        positive = rows[adv[rows] > 0]
        if len(rows) < 2 or len(positive) == 0:
            continue
        w = torch.softmax(adv[positive] / tau, 0)  # (n,)
        act, tok, lp = active[positive], tokens[positive], logp[positive]  # (n, T)
        same = (tok[:, None] == tok[None]) & act[:, None] & act[None]  # (n, n, T): same token, both decoded
        mass = (w[None, :, None] * same).sum(1)  # (n, T): weight of each row's token
        q = mass / ((w[:, None] * act).sum(0, keepdim=True) + 1e-8)
        earlier = torch.tril(torch.ones(len(positive), len(positive), dtype=torch.bool), -1)
        first = act & ~(same & earlier[:, :, None]).any(1)  # (n, T): each token of a position counted once
        terms = torch.where(first, q * (torch.log(q + 1e-8) - lp.double()), 0.0)
        total = total + terms.sum()
        count += int(act.any(0).sum())
    return (total / count).to(logp.dtype) if count else total


@policy_loss("segment_ppo")
def segment_ppo(algo, policy, batch: RolloutBatch, inner_step: int) -> LossOutput:
    """d-TreeRPO's loss of one micro-batch of segments (weight: its rows)."""
    cfg = algo.config
    k = inner_step % len(batch.noise)
    est = algo.estimator.estimate(policy, batch, batch.noise[k])
    active = batch.completion_mask
    if cfg.skip_zero_logp:  # DARE's active mask reads the new log-probs: a certain token (log p == 0) drops out
        active = active & (est.token_logp.detach() != 0)
    act = active.to(est.token_logp.dtype)
    length = act.sum(1).clamp(min=1)
    ratio = safe_exp(est.token_logp - batch.old_logp[k])
    pg, took = clip_surrogate(ratio, batch.advantages[:, None], cfg.clip_low, cfg.clip_high, cfg.clip_c)
    per_row = (pg * act).sum(1) / length
    metrics = {"policy_loss": float(per_row.mean().detach())}
    if cfg.beta > 0:
        kl = (kl_penalty(est.token_logp, batch.ref_logp[k], cfg.kl_estimator) * act).sum(1) / length
        per_row = per_row + cfg.beta * kl
        metrics["kl_ref"] = float(kl.mean().detach())
    loss = per_row.mean()
    if cfg.self_distillation:
        lam, tau = distillation_schedule(batch.extras["tree"].step, cfg.sd_max_steps, cfg.sd_lambda_max,
                                         cfg.sd_gamma, cfg.sd_tau_max, cfg.sd_tau_power)
        sd = self_distillation(est.token_logp, batch.completion_ids, active, batch.advantages, batch.group_ids, tau)
        loss = loss + lam * sd
        metrics.update(sd_kl=float(sd.detach()), sd_lambda=lam)
    counted = act.sum().clamp(min=1)
    metrics.update(clip_fraction=float((took.float() * act).sum() / counted),
                   ratio_max_dev=float(((ratio.detach() - 1).abs() * act).max()) if active.any() else 0.0,
                   active_tokens=float(act.sum(1).mean()))
    return LossOutput(loss=loss, weight=float(batch.size), metrics=metrics)
