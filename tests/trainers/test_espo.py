"""ESPO: the stratified {0..L_v} counts, both ELBO halves unbiased (k = 0 and k = L_v included), the
complementary half lowering the variance, the sequence ratio and the k2 KL on raw ELBOs over L."""

from __future__ import annotations

import math

import pytest
import torch

from dare.trainers import build_algorithm, build_estimator

from .toy import JointPolicy, make_batch, sequence_draws

RESPONSE = [2, 0, 1, 2]


def test_counts_are_stratified_across_the_batch_rows_with_one_offset_per_draw():
    """ML-GSAI/ESPO espo_trainer.py forward_process: k ~ U{0..L}, x_i = round(k + i (L + 1) / b) mod (L + 1)
    for the b rows of one call; each Monte-Carlo draw is its own call (its own k)."""
    est = build_estimator("espo_elbo", {"samples": 3})
    batch = make_batch(4, 2, [1] * 9)  # L = 9, b = 4: offsets round(i * 2.5) = 0, 2, 5, 8 (round half to even)
    counts = est.draw(batch, torch.Generator().manual_seed(3))["counts"]  # (B, n)
    for j in range(3):
        k = counts[0, j]
        expected = torch.remainder(torch.round(k + torch.arange(4, dtype=torch.float64) * 10 / 4), 10)
        assert torch.equal(counts[:, j], expected)
    assert len(set(counts[0].tolist())) > 1 or len(set(counts[1].tolist())) > 1  # draws have their own k
    row = build_estimator("espo_elbo", {"samples": 3, "stratify": "samples"})
    assert not torch.equal(row.draw(batch, torch.Generator().manual_seed(3))["counts"], counts)


def test_row_strata_counts_are_stratified_over_zero_to_lv_and_the_tail_is_never_drawn():
    est = build_estimator("espo_elbo", {"samples": 2, "stratify": "samples"})
    batch = make_batch(400, 2, [1] * 12)
    batch.completion_mask[:, 9:] = False  # L_v = 9: counts in {0..9}, strata of width 5
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    counts = noise["counts"]
    assert torch.equal(noise["masked"].sum(-1).double(), counts) and not noise["masked"][..., 9:].any()
    assert counts.min() == 0 and counts.max() == 9  # both ends occur: no division by zero allowed
    gap = torch.remainder(counts[:, 1] - counts[:, 0], 10)
    assert set(gap.unique().tolist()) == {5.0}
    assert abs(float(counts.mean()) - 4.5) < 0.3  # each x_j uniform on {0..9}


@pytest.mark.parametrize("reduce_var", [False, True])
def test_each_half_is_unbiased(reduce_var):
    policy = JointPolicy(n=4, vocab=3, seed=1)
    truth = policy.log_prob(RESPONSE)
    draws = sequence_draws("espo_elbo", {"samples": 2, "reduce_var": reduce_var}, policy, RESPONSE, rows=6000)
    assert torch.isfinite(draws).all()
    se = float(draws.std() / math.sqrt(len(draws)))
    assert abs(float(draws.mean()) - truth) < 4.5 * se + 1e-3


def test_the_complementary_half_lowers_the_variance():
    policy = JointPolicy(n=4, vocab=3, seed=1)
    coupled = sequence_draws("espo_elbo", {"samples": 2, "reduce_var": True}, policy, RESPONSE, rows=4000)
    masked_only = sequence_draws("espo_elbo", {"samples": 2, "reduce_var": False}, policy, RESPONSE, rows=4000)
    assert float(coupled.var()) < 0.8 * float(masked_only.var())


def test_sequence_ratio_starts_at_one_and_the_kl_is_k2_on_raw_elbos_over_l():
    algo = build_algorithm("espo", {"beta": 0.5})
    policy = JointPolicy(n=4, vocab=3, seed=1)
    algo.bind(policy.attention)
    batch = make_batch(4, policy.prompt_len, RESPONSE)
    batch.group_ids = torch.tensor([0, 0, 1, 1])
    batch.rewards = torch.tensor([1.0, 0.0, 0.5, 0.5])
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(0))
    assert len(batch.noise) == 8  # one precomputed draw set per inner update
    with torch.no_grad():
        batch.old_logp = torch.stack([algo.estimator.estimate(policy, batch, s).token_logp for s in batch.noise])
    batch.ref_logp = batch.old_logp - 0.3  # every ELBO 4 * 0.3 above its reference
    batch.advantages = algo.advantages(batch)
    assert batch.advantages.tolist() == [1.0, -1.0, 0.0, 0.0]  # RLOO
    out = algo.loss(policy, batch, 0)
    assert out.metrics["ratio_max_dev"] == 0.0 and out.metrics["clip_fraction"] == 0.0
    kl = 0.5 * (4 * 0.3) ** 2 / 4  # k2 on the raw ELBO difference, then / L
    assert out.metrics["kl_ref"] == pytest.approx(kl, rel=1e-5)
    assert float(out.loss) == pytest.approx((-1.0 + 1.0) / 4 + 0.5 * kl, rel=1e-5)
