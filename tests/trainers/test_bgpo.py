"""BGPO: the stratified mask-count ELBO (unbiased, lower variance than i.i.d. levels), the linear / Jensen bound
surrogates and their gradients, per-sample noise sets, the DARE preset, and dare-train end to end."""

from __future__ import annotations

import json
import math

import pytest
import torch

from dare.harness.errors import ConfigError
from dare.trainers import build_algorithm, build_estimator
from dare.trainers.cli import main
from dare.trainers.losses.bounds import bound_ratio
from dare.trainers.ops import clip_surrogate
from dare.trainers.training.config import resolve_algorithm
from dare.trainers.training.trainer import accumulate_gradients

from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)
from .toy import ContextFreePolicy, JointPolicy, make_batch, sequence_draws

RESPONSE = [2, 0, 1, 2]


def test_stratified_counts_cover_the_strata_exactly():
    est = build_estimator("stratified_elbo", {"samples": 4})
    batch = make_batch(300, 2, [1] * 13)
    batch.completion_mask[:, 10:] = False  # L_v = 10, tail hidden
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    counts = (noise["masked"][..., :10]).sum(-1)
    assert torch.equal(counts.double() / 10, noise["t"]) and noise["masked"][..., 10:].all()
    assert counts.min() >= 1 and counts.max() <= 10
    gaps = counts.sort(-1).values.diff(dim=-1)
    assert set(gaps.unique().tolist()) <= {2, 3}  # one count per stratum of width L_v / n = 2.5
    assert abs(float(counts.double().mean()) - 5.5) < 0.2  # each x_j uniform on {1..10}


@pytest.mark.parametrize("name, block", [("stratified_elbo", None), ("block_stratified_elbo", 2)])
def test_stratified_elbo_is_unbiased_with_lower_variance_than_iid_levels(name, block):
    policy = JointPolicy(n=4, vocab=3, block_size=block, seed=1)
    truth = policy.log_prob(RESPONSE)
    strat = sequence_draws(name, {"samples": 4}, policy, RESPONSE, rows=6000)
    se = float(strat.std() / math.sqrt(len(strat)))
    assert abs(float(strat.mean()) - truth) < 4.5 * se + 1e-3
    plain = sequence_draws("mc_elbo" if block is None else "block_elbo", {"samples": 4, "eps": 1e-5}, policy,
                           RESPONSE, 6000)
    assert float(strat.var()) < 0.8 * float(plain.var())


def test_bound_surrogates_bound_the_sequence_objective_from_below():
    delta = torch.linspace(-3, 3, 61, dtype=torch.float64)
    linear = bound_ratio(delta, torch.ones_like(delta, dtype=torch.bool))
    assert torch.allclose(linear, 1 + delta) and (linear <= torch.exp(delta)).all()  # A > 0: A r <= A exp(d)
    d = torch.randn(1000, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    exp = bound_ratio(d, torch.zeros_like(d, dtype=torch.bool))
    assert torch.allclose(exp, torch.exp(d))
    assert (exp.mean(1) >= torch.exp(d.mean(1))).all()  # A < 0: A mean exp(d_j) <= A exp(mean d_j)


@pytest.mark.parametrize("adv", [1.5, -0.7])
def test_both_branches_give_minus_a_grad_l_at_the_old_policy(adv):
    value = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    old = value.detach().clone()
    a = torch.tensor([adv], dtype=torch.float64)
    loss, _ = clip_surrogate(bound_ratio(value - old, a > 0), a, 0.2, 0.2, 3.0)
    (grad,) = torch.autograd.grad(loss.sum(), value, create_graph=True)
    assert float(grad.detach()) == pytest.approx(-adv)
    if adv > 0:  # the linear surrogate: constant gradient, zero curvature
        (curv,) = torch.autograd.grad(grad.sum(), value, allow_unused=True)
        assert curv is None or float(curv) == 0.0


def _bgpo_setup(n=3):
    algo = build_algorithm("bgpo", {"estimator_args": {"samples": n}})
    policy = ContextFreePolicy(n=4, vocab=4, prompt_len=2)
    algo.bind(policy.attention)
    batch = make_batch(2, 2, [0, 1, 2, 3])
    batch.completion_ids = torch.tensor([[0, 1, 2, 3], [3, 3, 1, 0]])
    batch.completion_mask[1, 3] = False
    batch.group_ids = torch.zeros(2, dtype=torch.long)
    batch.rewards = torch.tensor([1.0, 0.0])
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        batch.old_logp = torch.stack([algo.estimator.estimate(policy, batch, s).token_logp for s in batch.noise])
    batch.advantages = algo.advantages(batch)
    return algo, policy, batch


def test_each_mc_sample_is_its_own_noise_set_and_the_first_gradient_is_the_policy_gradient():
    algo, policy, batch = _bgpo_setup(n=3)
    assert len(batch.noise) == 3 and all(s["masked"].shape[1] == 1 for s in batch.noise)
    out = algo.loss(policy, batch, 0)
    assert out.metrics["ratio_max_dev"] == 0.0 and out.metrics["clip_fraction"] == 0.0
    out.loss.backward()
    got = policy.logits.grad.clone()
    policy.logits.grad = None
    # expected: -(1/n) sum_j sum_b A_b L_v,b grad(l_jb) / sum_b L_v,b with l_jb = ELBO_jb / T
    lengths = batch.completion_mask.sum(1).double()
    total = 0.0
    for s in batch.noise:
        elbo = (algo.estimator.estimate(policy, batch, s).token_logp * batch.completion_mask).sum(1) / 4
        total = total - (batch.advantages.double() * lengths * elbo).sum() / lengths.sum() / 3
    total.backward()
    assert torch.allclose(got, policy.logits.grad, atol=1e-12)


class PendingGraphs:
    """Wraps a policy's ``token_logp``: at each forward, how many earlier outputs still await their backward
    (each one pins a whole forward's activations)."""

    def __init__(self, policy):
        self.pending, self.at_forward = 0, []
        inner = policy.token_logp

        def token_logp(*args, **kwargs):
            self.at_forward.append(self.pending)
            logp, entropy = inner(*args, **kwargs)
            self.pending += 1
            logp.register_hook(self._backward)
            return logp, entropy

        policy.token_logp = token_logp

    def _backward(self, grad):
        self.pending -= 1


def test_per_sample_backward_gives_the_same_gradient_in_constant_memory():
    """The trainer backpropagates each MC sample's term before the next forward (BGPO's memory claim: no
    graph outlives its sample), with the same gradient, loss and metrics as the whole loss in one graph."""
    algo, policy, batch = _bgpo_setup(n=8)
    whole = PendingGraphs(policy)
    out = algo.loss(policy, batch, 0)
    out.loss.backward()
    expected = policy.logits.grad.clone()
    policy.logits.grad = None
    assert whole.at_forward == list(range(8))  # one graph: every sample's activations held at once
    algo, policy, batch = _bgpo_setup(n=8)
    terms = PendingGraphs(policy)
    weight, stats = accumulate_gradients(algo, policy, batch, micro_batch_size=batch.size, inner=0)
    assert terms.at_forward == [0] * 8 and terms.pending == 0
    assert torch.allclose(policy.logits.grad / weight, expected, atol=1e-12, rtol=1e-10)
    assert stats["loss"] / weight == pytest.approx(float(out.loss.detach()), rel=1e-12)
    assert stats["clip_fraction"] / weight == out.metrics["clip_fraction"]


def test_clipping_is_per_sample_after_an_update():
    algo, policy, batch = _bgpo_setup(n=3)
    with torch.no_grad():
        policy.logits += 3.0 * torch.randn(policy.logits.shape, generator=torch.Generator().manual_seed(1),
                                           dtype=torch.float64)
    out = algo.loss(policy, batch, 0)
    assert out.metrics["ratio_max_dev"] > 0.2 and 0 < out.metrics["clip_fraction"] <= 1


def test_estimators_without_per_sample_draws_are_refused():
    with pytest.raises(ConfigError, match="per-sample draws"):
        build_algorithm("bgpo", {"estimator": "one_step", "estimator_args": {}}).bind("bidirectional")
    assert build_algorithm("bgpo").bind("block_causal").name == "block_stratified_elbo"


def test_dare_preset_differs_from_the_paper():
    paper = build_algorithm(*resolve_algorithm("bgpo", {}))
    dare = build_algorithm(*resolve_algorithm("bgpo_dare", {}))
    assert not paper.config.count_padding and dare.config.count_padding
    # the difference in effect: DARE's LLaDA rollouts count the EOS tail, so the ELBO samples and the
    # length weights include it and the loss changes
    algo, policy, batch = _bgpo_setup(n=3)
    paper_loss = algo.loss(policy, batch, 0).loss
    batch.completion_mask = torch.ones_like(batch.completion_mask)
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        batch.old_logp = torch.stack([algo.estimator.estimate(policy, batch, s).token_logp for s in batch.noise])
    assert not torch.allclose(paper_loss, algo.loss(policy, batch, 0).loss)


@pytest.mark.parametrize("arch", ["llada", pytest.param("sdar", marks=pytest.mark.slow)])
def test_bgpo_trains_two_steps_end_to_end(tiny, tmp_path, digits_suite, arch):  # noqa: F811
    args = ["--algo", "bgpo", "--model-path", str(tiny[arch]), "--suite", digits_suite, "--out", str(tmp_path),
            *FAST, "--set", "rollout.temperature=1.0", "--set", "algo.estimator_args={samples: 2}"]
    assert main(args) == 0
    lines = (tmp_path / f"bgpo-{digits_suite}-{arch}-s0" / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines]
    assert [r["step"] for r in rows] == [1, 2] and all(math.isfinite(r["loss"]) for r in rows)
    assert rows[0]["first_inner_ratio_max_dev"] == 0.0 and any(r["grad_norm"] > 0 for r in rows)
