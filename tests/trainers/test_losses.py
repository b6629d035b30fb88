"""Advantages, the clipped GRPO loss and its gradient, against hand-computed values."""

from __future__ import annotations

import math

import torch

from dare.trainers import build_algorithm
from dare.trainers.ops import (
    clipped_policy_loss,
    grpo_advantages,
    kl_penalty,
    mean_baseline_advantages,
    rloo_advantages,
)

from .toy import ContextFreePolicy, make_batch


def test_advantages_are_zero_when_a_group_has_equal_rewards():
    rewards = torch.tensor([0.7] * 8 + [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    groups = torch.tensor([0] * 8 + [1] * 8)
    for fn in (grpo_advantages, mean_baseline_advantages, rloo_advantages):
        adv = fn(rewards, groups)
        assert torch.equal(adv[:8], torch.zeros(8))
        assert (adv[8:] != 0).all()


def test_grpo_advantage_uses_the_unbiased_std_and_size_one_groups():
    adv = grpo_advantages(torch.tensor([1.0, 0.0, 0.5]), torch.tensor([0, 0, 1]))
    expected = 0.5 / (math.sqrt(0.5) + 1e-6)  # unbiased std of {1, 0} is sqrt(1/2)
    assert torch.allclose(adv[:2], torch.tensor([expected, -expected]))
    assert torch.allclose(adv[2], torch.tensor(0.5 / (1 + 1e-6)))  # verl: mean 0, std 1 for a group of one
    loo = rloo_advantages(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0, 0, 0]))
    assert torch.allclose(loo, torch.tensor([1.0, -0.5, -0.5]))


def test_dual_clip_values():
    logp = torch.log(torch.tensor([[2.0, 0.5, 5.0]]))
    old = torch.zeros(1, 3)
    pos, _ = clipped_policy_loss(logp, old, torch.tensor([1.0]), 0.2, 0.2, 3.0)
    assert torch.allclose(pos, -torch.tensor([[1.2, 0.5, 1.2]]))  # min(r, clip(r)) for A > 0
    neg, stats = clipped_policy_loss(logp, old, torch.tensor([-1.0]), 0.2, 0.2, 3.0)
    assert torch.allclose(neg, torch.tensor([[2.0, 0.8, 3.0]]))  # max(r, clip(r)), capped at c = 3
    assert torch.equal(stats["clipped"], torch.tensor([[0.0, 1.0, 1.0]]))


def test_kl_estimators():
    logp, ref = torch.tensor([0.0, -1.0]), torch.tensor([-0.5, -1.0])
    d = logp - ref
    assert torch.allclose(kl_penalty(logp, ref, "k1"), d)
    assert torch.allclose(kl_penalty(logp, ref, "k2"), 0.5 * d ** 2)
    assert torch.allclose(kl_penalty(logp, ref, "k3"), torch.exp(-d) + d - 1)


def _d1_setup(rewards):
    algo = build_algorithm("d1", {"beta": 0.0, "inner_steps": 1})
    policy = ContextFreePolicy(n=3, vocab=4, prompt_len=2)
    algo.bind(policy.attention)
    batch = make_batch(2, 2, [0, 1, 2])
    batch.completion_ids = torch.tensor([[0, 1, 2], [3, 3, 1]])
    batch.group_ids = torch.zeros(2, dtype=torch.long)
    batch.rewards = torch.tensor(rewards)
    batch.noise = [algo.estimator.draw(batch, torch.Generator().manual_seed(0))]
    with torch.no_grad():
        batch.old_logp = algo.estimator.estimate(policy, batch, batch.noise[0]).token_logp[None]
    batch.advantages = algo.advantages(batch)
    return algo, policy, batch


def test_grpo_gradient_equals_the_hand_computed_one_on_a_two_sample_group():
    algo, policy, batch = _d1_setup([1.0, 0.0])
    out = algo.loss(policy, batch, 0)
    out.loss.backward()
    # ratio = 1 and no clipping: d/dtheta of -(1/N) sum_j A_j sum_i log softmax(theta_i)[y_ji]
    adv = batch.advantages.double()
    assert torch.allclose(adv, torch.tensor([0.5, -0.5], dtype=torch.double))  # d1: r - mean
    probs = policy.logits.detach().softmax(-1)
    expected = torch.zeros_like(probs)
    for j in range(2):
        for i in range(3):
            onehot = torch.nn.functional.one_hot(batch.completion_ids[j, i], 4).double()
            expected[i] -= adv[j] * (onehot - probs[i]) / 6
    assert torch.allclose(policy.logits.grad, expected, atol=1e-12)


def test_ratio_is_exactly_one_before_the_first_update():
    algo, policy, batch = _d1_setup([1.0, 0.0])
    out = algo.loss(policy, batch, 0)
    assert out.metrics["ratio_max_dev"] == 0.0 and out.metrics["clip_fraction"] == 0.0
    out.loss.backward()
    with torch.no_grad():
        policy.logits -= 0.5 * policy.logits.grad
    assert algo.loss(policy, batch, 1).metrics["ratio_max_dev"] > 0


def test_equal_rewards_give_zero_gradient():
    algo, policy, batch = _d1_setup([0.3, 0.3])
    algo.loss(policy, batch, 0).loss.backward()
    assert torch.count_nonzero(policy.logits.grad) == 0


def test_dipo_drops_groups_with_equal_rewards_and_keeps_the_others():
    algo = build_algorithm("dipo")
    batch = make_batch(4, 1, [1])
    batch.group_ids = torch.tensor([0, 0, 1, 1])
    batch.rewards = torch.tensor([1.0, 1.0, 1.0, 0.0])
    adv = algo.advantages(batch)
    assert torch.equal(adv[:2], torch.zeros(2)) and adv[2] > 0 > adv[3]
