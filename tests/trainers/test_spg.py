"""SPG: the sandwiched bounds on a toy model with a known likelihood, SPG's block-random masks, the loss's
branch and gradient signs, the DARE preset, the refusal of block models, and dare-train end to end."""

from __future__ import annotations

import itertools
import json
import math

import pytest
import torch

from dare.harness.errors import ConfigError
from dare.trainers import build_algorithm, build_estimator
from dare.trainers.cli import main
from dare.trainers.training.config import resolve_algorithm

from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)
from .toy import ContextFreePolicy, JointPolicy, make_batch

RESPONSE = [2, 0, 1, 2]


def exact_conditional(policy: JointPolicy, response: list[int], i: int, seen: tuple[int, ...]) -> float:
    """p(y_i | y_seen) under the toy joint."""
    agree = torch.ones(len(policy.seqs), dtype=torch.bool)
    for s in seen:
        agree &= policy.seqs[:, s] == response[s]
    hit = agree & (policy.seqs[:, i] == response[i])
    return float(policy.joint[hit].sum() / policy.joint[agree].sum())


def exact_eubo(policy: JointPolicy, response: list[int], beta: float) -> float:
    """(1/beta) sum_i log E[p(y_i | visible)^beta] with m ~ U{1..L} masked: visible sets of every size equally."""
    n = len(response)
    total = 0.0
    for i in range(n):
        others = [s for s in range(n) if s != i]
        q = sum(sum(exact_conditional(policy, response, i, seen) ** beta for seen in itertools.combinations(others, k))
                / math.comb(n - 1, k) for k in range(n)) / n
        total += math.log(q) / beta
    return total


@pytest.mark.parametrize("beta", [1.0, 1.5])
def test_bounds_sandwich_the_true_log_likelihood(beta):
    """Exact conditionals of a joint: E[ELBO] = log p < EUBO (Jensen), and the estimator's EUBO converges to
    the exact one (so its 1/t weights and beta are right)."""
    policy = JointPolicy(n=4, vocab=3, seed=2)
    truth = policy.log_prob(RESPONSE)
    est = build_estimator("sandwich", {"samples": 20000, "masking": "random"})
    batch = make_batch(1, 1, RESPONSE)
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        lower, upper, _ = est.bounds(policy, batch, noise, beta)
    draws = (est.draw_logp(policy, batch, noise).token_logp * est._weights(batch, noise, torch.float32)).sum(-1)
    se = float(draws.double().std() / math.sqrt(draws.numel()))
    exact_upper = exact_eubo(policy, RESPONSE, beta)
    assert exact_upper > truth + 0.05  # a strict upper bound on this joint
    assert abs(float(lower.sum()) - truth) < 4.5 * se + 1e-3
    assert abs(float(upper.sum()) - exact_upper) < 0.05  # Monte-Carlo error of 20000 draws (~0.01)
    assert float(upper.sum()) > truth > float(lower.sum()) - 4.5 * se - 1e-3


class TemperedPolicy(JointPolicy):
    """The joint's conditionals raised to ``power`` and renormalised: conditionals of *no* joint, so the model's
    likelihood is the any-order marginal log E_order exp(sum_k log p(y_k | y_before))."""

    power = 2.0

    def token_logp(self, input_ids, positions, mask, index, targets):
        every = torch.stack([super(TemperedPolicy, self).token_logp(input_ids, positions, mask, index,
                                                                   torch.full_like(targets, v))[0]
                             for v in range(self.vocab)], -1).double() * self.power
        logp = every.log_softmax(-1).gather(-1, targets[..., None])[..., 0]
        return logp.float(), torch.zeros_like(logp, dtype=torch.float32)

    def order_sums(self, response: list[int]) -> torch.Tensor:
        """sum_k log p~(y_order[k] | y_order[<k]) for every order (n!,)."""
        sums = []
        for order in itertools.permutations(range(self.n)):
            total = 0.0
            for k, i in enumerate(order):
                probs = torch.tensor([exact_conditional(self, [*response[:i], v, *response[i + 1:]], i, order[:k])
                                      for v in range(self.vocab)], dtype=torch.float64) ** self.power
                total += math.log(probs[response[i]] / probs.sum())
            sums.append(total)
        return torch.tensor(sums, dtype=torch.float64)


def test_elbo_is_strictly_below_the_likelihood_of_a_model_without_a_joint():
    policy = TemperedPolicy(n=4, vocab=3, seed=2)
    sums = policy.order_sums(RESPONSE)
    truth = float(torch.logsumexp(sums, 0) - math.log(len(sums)))  # any-order marginal likelihood
    elbo = float(sums.mean())  # what the 1/t-weighted ELBO estimates
    assert truth > elbo + 0.05
    est = build_estimator("sandwich", {"samples": 8000, "masking": "random"})
    batch = make_batch(1, 1, RESPONSE)
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        draws = (est.draw_logp(policy, batch, noise).token_logp * est._weights(batch, noise, torch.float32)).sum(-1)
    se = float(draws.double().std() / math.sqrt(draws.numel()))
    assert abs(float(draws.double().mean()) - elbo) < 4.5 * se + 1e-3 and float(draws.double().mean()) < truth


def test_eubo_is_tight_when_the_model_ignores_the_context():
    policy = ContextFreePolicy(n=4, vocab=3)
    est = build_estimator("sandwich", {"samples": 20000, "masking": "random"})
    batch = make_batch(1, 1, RESPONSE)
    with torch.no_grad():
        truth = float(policy.logits.log_softmax(-1)[torch.arange(4), torch.tensor(RESPONSE)].sum())
        _, upper, _ = est.bounds(policy, batch, est.draw(batch, torch.Generator().manual_seed(1)), 1.5)
    assert abs(float(upper.sum()) - truth) < 0.02


def test_block_random_masks_follow_spg():
    """Without prompt masking: block j partly masked (1..B_j of its counted tokens), everything after it masked,
    nothing before it; distinct blocks across a row's draws; the tail always masked; t = masked share."""
    est = build_estimator("sandwich", {"samples": 3, "block_length": 4, "prompt_mask_prob": 0.0})
    batch = make_batch(200, 5, [1] * 12)
    batch.completion_mask[:, 11:] = False  # tail after EOS: 3 counted blocks of sizes 4, 4, 3
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    masked, t = noise["masked"], noise["t"]
    assert masked[..., 11:].all() and not noise["prompt_masked"].any()
    blocks = torch.arange(11) // 4
    sizes = [4, 4, 3]
    for r in range(200):
        chosen = []
        for j in range(3):
            row = masked[r, j, :11]
            first = int(blocks[row].min())
            count = int(row[blocks == first].sum())
            assert 1 <= count <= sizes[first] and row[blocks > first].all() and not row[blocks < first].any()
            chosen.append(first)
        assert sorted(chosen) == [0, 1, 2]  # SPG: a random permutation of the blocks, modulo the counted ones
    assert torch.equal((masked[..., :11]).sum(-1).double() / 11, t)
    light = build_estimator("sandwich", {"samples": 3, "block_length": 4, "prompt_mask_prob": 0.15})
    batch.prompt_mask[:, :2] = False  # left padding is never masked
    prompt = light.draw(batch, torch.Generator().manual_seed(1))["prompt_masked"]
    assert not prompt[..., :2].any() and float(prompt[..., 2:].float().mean()) == pytest.approx(0.15, abs=0.02)


def _spg_setup(rewards, **settings):
    algo = build_algorithm("spg", {"estimator_args": {"samples": 2, "block_length": 2}, "inner_steps": 1,
                                   "resample_noise": False, **settings})
    policy = ContextFreePolicy(n=4, vocab=4, prompt_len=2)
    algo.bind(policy.attention)
    batch = make_batch(len(rewards), 2, [0, 1, 2, 3])
    batch.group_ids = torch.zeros(len(rewards), dtype=torch.long)
    batch.rewards = torch.tensor(rewards)
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(0))
    batch.advantages = algo.advantages(batch)
    return algo, policy, batch


def test_positive_rows_use_the_elbo_and_negative_rows_the_mixture():
    algo, policy, batch = _spg_setup([1.0, 0.0, 0.0])
    lower, upper, _ = algo.estimator.bounds(policy, batch, batch.noise[0], 1.5)
    out = algo.loss(policy, batch, 0)
    adv = batch.advantages.double()
    assert torch.allclose(adv, torch.tensor([2 / 3, -1 / 3, -1 / 3], dtype=torch.double))  # r - mean, no std
    chosen = torch.stack([lower[0], 0.5 * upper[1] + 0.5 * lower[1], 0.5 * upper[2] + 0.5 * lower[2]])
    expected = -(adv[:, None] * chosen.double()).sum() / 12  # sum_b -A_b bound_b / sum_b L_v
    assert float(out.loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-9)


@pytest.mark.parametrize("reward, bound", [([1.0, 0.0], "lower"), ([0.0, 1.0], "upper")])
def test_a_gradient_step_raises_the_elbo_of_good_rows_and_lowers_the_eubo_of_bad_rows(reward, bound):
    algo, policy, batch = _spg_setup(reward, negative_bound="eubo")
    row = batch.select(slice(0, 1))
    with torch.no_grad():
        before = algo.estimator.bounds(policy, row, row.noise[0], 1.5)
    algo.loss(policy, row, 0).loss.backward()
    with torch.no_grad():
        policy.logits -= 0.1 * policy.logits.grad
        after = algo.estimator.bounds(policy, row, row.noise[0], 1.5)
    index = 0 if bound == "lower" else 1
    change = float(after[index].sum() - before[index].sum())
    assert change > 0 if bound == "lower" else change < 0


def test_dare_preset_differs_from_the_paper():
    paper = build_algorithm(*resolve_algorithm("spg", {}))
    dare = build_algorithm(*resolve_algorithm("spg_dare", {}))
    assert (paper.config.inner_steps, dare.config.inner_steps) == (4, 1)
    assert (paper.config.estimator_args["samples"], dare.config.estimator_args["samples"]) == (2, 1)
    assert (paper.num_noise_sets, dare.num_noise_sets) == (4, 1)
    assert not paper.config.count_padding and dare.config.count_padding
    batch = make_batch(4, 2, [0, 1, 2, 3])
    batch.group_ids = torch.zeros(4, dtype=torch.long)
    batch.rewards = torch.tensor([1.0, 0.0, 0.0, 0.0])
    assert not torch.allclose(paper.advantages(batch), dare.advantages(batch))  # r - mean vs GRPO std
    paper.bind("bidirectional")
    dare.bind("bidirectional")
    gen = torch.Generator().manual_seed(0)
    assert paper.estimator.draw(batch, gen)["masked"].shape[1] == 2
    assert dare.estimator.draw(batch, gen)["masked"].shape[1] == 1


def test_block_models_are_refused_with_a_config_error():
    with pytest.raises(ConfigError, match="needs a bidirectional model"):
        build_algorithm("spg").bind("block_causal")
    with pytest.raises(ConfigError, match="lower and upper bounds"):
        build_algorithm("spg", {"estimator": "mc_elbo", "estimator_args": {}}).bind("bidirectional")


def test_spg_trains_two_steps_end_to_end(tiny, tmp_path, digits_suite):  # noqa: F811
    args = ["--algo", "spg", "--model-path", str(tiny["llada"]), "--suite", digits_suite, "--out", str(tmp_path),
            *FAST, "--set", "algo.inner_steps=2", "--set", "rollout.temperature=1.0",
            "--set", "algo.estimator_args={samples: 2, block_length: 4}"]
    assert main(args) == 0
    lines = (tmp_path / f"spg-{digits_suite}-llada-s0" / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(math.isfinite(r["loss"]) and r["eubo_per_token"] >= r["elbo_per_token"] - 1.0 for r in rows)
    assert any(r["grad_norm"] > 0 for r in rows)
