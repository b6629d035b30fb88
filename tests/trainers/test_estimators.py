"""Numerical checks of the likelihood estimators on toy policies whose true likelihood is known."""

from __future__ import annotations

import math

import pytest
import torch

from dare.harness.registry import estimators
from dare.trainers import build_estimator

from .toy import ContextFreePolicy, JointPolicy, make_batch

RESPONSE = [2, 0, 1, 2]


def _draws(name: str, options: dict, policy, rows: int, seed: int = 0) -> torch.Tensor:
    """Sequence estimates (rows,) from ``rows`` independent draws on the same (prompt, response)."""
    est = build_estimator(name, options)
    batch = make_batch(rows, policy.prompt_len, RESPONSE[:policy.n])
    noise = est.draw(batch, torch.Generator().manual_seed(seed))
    return est.estimate(policy, batch, noise).token_logp.double().sum(-1)


def _assert_unbiased(samples: torch.Tensor, truth: float, slack: float = 0.0) -> None:
    mean, se = float(samples.mean()), float(samples.std() / math.sqrt(len(samples)))
    assert abs(mean - truth) < 4.5 * se + slack, (mean, truth, se)


@pytest.mark.parametrize("options", [
    {"samples": 1}, {"samples": 2, "antithetic": True}, {"samples": 4, "stratified": True},
])
def test_masked_elbo_is_unbiased_for_exact_conditionals(options):
    policy = JointPolicy(n=4, vocab=3)
    samples = _draws("mc_elbo", {"eps": 1e-5, **options}, policy, rows=12000)
    _assert_unbiased(samples, policy.log_prob(RESPONSE), slack=0.01)


@pytest.mark.parametrize("options", [{"samples": 1}, {"samples": 2, "antithetic": True}])
def test_block_elbo_is_unbiased_for_exact_conditionals(options):
    policy = JointPolicy(n=4, vocab=3, block_size=2, seed=1)
    samples = _draws("block_elbo", {"eps": 1e-5, **options}, policy, rows=12000)
    _assert_unbiased(samples, policy.log_prob(RESPONSE), slack=0.01)


def test_elbo_detects_a_wrong_weighting():
    """Guard for the test itself: dropping the 1/t weight is visibly biased."""
    policy = JointPolicy(n=4, vocab=3)
    est = build_estimator("mc_elbo", {"eps": 1e-5})
    batch = make_batch(8000, 1, RESPONSE)
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    noise["t"] = torch.ones_like(noise["t"])  # weight 1 instead of 1/t
    wrong = est.estimate(policy, batch, noise).token_logp.double().sum(-1)
    assert abs(float(wrong.mean()) - policy.log_prob(RESPONSE)) > 0.5


def test_antithetic_pairs_mask_complementary_token_sets():
    est = build_estimator("mc_elbo", {"samples": 4, "antithetic": True})
    noise = est.draw(make_batch(64, 1, RESPONSE), torch.Generator().manual_seed(0))
    masked = noise["masked"]
    assert torch.equal(masked[:, 0::2] ^ masked[:, 1::2], torch.ones_like(masked[:, 0::2]))
    assert torch.allclose(noise["t"][:, 1::2], (1 - noise["t"][:, 0::2]).clamp(min=est.eps))


@pytest.mark.parametrize("full_mask, scale", [(True, 1.5), (False, 1.0)])
def test_coupled_expectation_on_a_context_free_model(full_mask, scale):
    policy = ContextFreePolicy(n=4, vocab=3)
    with torch.no_grad():
        truth = float(policy.logits.log_softmax(-1)[torch.arange(4), torch.tensor(RESPONSE)].sum())
        samples = _draws("coupled", {"include_full_mask": full_mask}, policy, rows=8000)
    _assert_unbiased(samples, scale * truth, slack=1e-6)


def test_coupled_masks_cover_every_response_token_exactly_once():
    est = build_estimator("coupled", {})
    batch = make_batch(50, 3, [1] * 20)
    noise = est.draw(batch, torch.Generator().manual_seed(3))
    first = noise["first"]
    second = ~first  # z2 masks exactly the complement
    assert torch.equal(first.int() + second.int(), torch.ones_like(first, dtype=torch.int))
    assert ((noise["t"] >= 0.2) & (noise["t"] <= 0.8)).all()
    # the fraction masked by z1 follows t
    assert abs(float(first.float().mean(1).mean() - noise["t"].mean())) < 0.05


def test_coupled_weights_are_one_over_t_and_one_over_one_minus_t():
    policy = ContextFreePolicy(n=4, vocab=3)
    est = build_estimator("coupled", {"include_full_mask": False})
    batch = make_batch(4, 1, RESPONSE)
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = est.estimate(policy, batch, noise).token_logp
        lp = policy.logits.log_softmax(-1)[torch.arange(4), torch.tensor(RESPONSE)]
    t = noise["t"][:, None]
    expected = 0.5 * torch.where(noise["first"], lp / t, lp / (1 - t))
    assert torch.allclose(got.double(), expected.double(), atol=1e-6)


def test_same_seed_gives_identical_masks():
    batch = make_batch(6, 4, [1] * 10)
    for name in ("one_step", "coupled", "mc_elbo", "block_elbo"):
        est = estimators.get(name)()
        a = est.draw(batch, torch.Generator().manual_seed(42))
        b = est.draw(batch, torch.Generator().manual_seed(42))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_d1_masks_the_whole_response_and_about_15_percent_of_the_prompt():
    """d1 (diffu_grpo_trainer.py forward_process): ``prompt_index`` is every prompt column, left padding
    included; DARE (``prompt_padding="hidden"``) masks only real prompt tokens."""
    batch = make_batch(400, 50, [1, 2, 3])
    batch.prompt_mask[:, :10] = False  # left padding
    official = build_estimator("one_step", {"prompt_mask_prob": 0.15})
    padded = official.draw(batch, torch.Generator().manual_seed(0))["prompt_masked"]
    assert abs(float(padded.float().mean()) - 0.15) < 0.01 and abs(float(padded[:, :10].float().mean()) - 0.15) < 0.02
    est = build_estimator("one_step", {"prompt_mask_prob": 0.15, "prompt_padding": "hidden"})
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    masked = noise["prompt_masked"]
    assert not masked[:, :10].any()
    rate = float(masked[:, 10:].float().mean())
    assert abs(rate - 0.15) < 0.01

    seen = {}

    class Spy(ContextFreePolicy):
        def token_logp(self, input_ids, positions, mask, index, targets):
            seen["inputs"] = input_ids
            return super().token_logp(input_ids, positions, mask, index, targets)

    spy = Spy(n=3, vocab=4, prompt_len=50)
    est.estimate(spy, batch, noise)
    assert (seen["inputs"][:, 50:] == spy.mask_id).all()
    assert torch.equal(seen["inputs"][:, :50] == spy.mask_id, masked)
