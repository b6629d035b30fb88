"""UniGRPO (dLLM-RL random masking) against its official code: fixtures/unigrpo_official.json holds
Gen-Verse/dLLM-RL@10b4fd1's masks, old log-probs, loss and gradient on tests/trainers/official_net.py's TinyNet
(fixtures/scripts/make_unigrpo_fixture.py); fed the same masks and old log-probs, DARE's ``random_masking``
estimator and ``draw_ppo`` loss must give the same loss and gradient."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.trainers import build_algorithm, build_estimator

from .official_net import MASK_ID, NetPolicy, TinyNet, net_batch

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "unigrpo_official.json").read_text())


def fixture_batch(rewards=None):
    completion = torch.tensor(FIXTURE["completion_ids"])
    counted = torch.ones_like(completion, dtype=torch.bool)
    counted[2, 4:] = False  # the padded tail of row 2 (dLLM-RL post_num 0)
    rewards = torch.tensor([float(r) for g in FIXTURE["correct"] for r in g]) if rewards is None else rewards
    return net_batch(torch.tensor(FIXTURE["prompt_ids"]), completion, torch.tensor([0, 0, 1, 1]), rewards, counted)


def dare_loss(settings: dict, ref_shift: float | None = None):
    net = TinyNet(seed=3)
    batch = fixture_batch()
    algo = build_algorithm("unigrpo", {"estimator_args": {"samples": FIXTURE["copies_per_row"]}, **settings})
    algo.bind("bidirectional")
    masked = torch.tensor(FIXTURE["masked"])
    batch.noise = [{"t": torch.zeros(masked.shape[:2], dtype=torch.float64), "masked": masked}]
    batch.old_logp = torch.tensor(FIXTURE["old_logp"], dtype=torch.float64)[None]
    if ref_shift is not None:
        batch.ref_logp = batch.old_logp + ref_shift
    batch.advantages = algo.advantages(batch)
    out = algo.loss(NetPolicy(net), batch, 0)
    out.loss.backward()
    return float(out.loss.detach()), net.flat_grad(), batch.advantages


def test_unigrpo_loss_and_gradient_match_dllm_rl():
    loss, grad, adv = dare_loss({})
    assert adv.tolist() == pytest.approx(FIXTURE["advantages"])
    assert loss == pytest.approx(FIXTURE["loss"], rel=1e-6)
    assert torch.allclose(grad, torch.tensor(FIXTURE["grad"], dtype=torch.float64), rtol=1e-5, atol=1e-8)


def test_the_kl_is_taken_against_the_old_log_probs():
    """Quirk: dLLM-RL's KL compares with the behaviour policy's log-probs, not a reference model: a reference that
    differs from them leaves the loss alone, and ``kl_to: reference`` with that reference changes it."""
    assert dare_loss({}, ref_shift=0.7)[0] == pytest.approx(FIXTURE["loss"], rel=1e-6)
    assert abs(dare_loss({"kl_to": "reference"}, ref_shift=0.7)[0] - FIXTURE["loss"]) > 1e-3
    assert build_algorithm("unigrpo").requirements().reference is False


def test_groups_outside_the_pass_rate_band_are_dropped():
    """Pass rates 1.0 and 0.5: the first group is dropped (no counted token, advantage 0); all dropped: loss 0."""
    algo = build_algorithm("unigrpo")
    batch = fixture_batch(torch.tensor([1.0, 1.0, 1.0, 0.0]))
    adv = algo.advantages(batch)
    assert adv[:2].tolist() == [0.0, 0.0] and adv[2:].abs().min() > 0
    assert not batch.completion_mask[:2].any() and batch.completion_mask[3].all()
    net = TinyNet(seed=3)
    algo.bind("bidirectional")
    batch = fixture_batch(torch.tensor([1.0, 1.0, 0.0, 0.0]))
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(0))
    batch.advantages = algo.advantages(batch)
    batch.old_logp = torch.zeros(1, 4, 35, 6, dtype=torch.float64)
    out = algo.loss(NetPolicy(net), batch, 0)
    out.loss.backward()
    assert float(out.loss.detach()) == 0.0 and out.weight == 0.0 and torch.isfinite(net.flat_grad()).all()


def test_random_masking_draws_a_rate_per_copy_and_hides_the_tail_in_every_copy():
    est = build_estimator("random_masking", {"samples": 200})
    batch = fixture_batch()
    noise = est.draw(batch, torch.Generator().manual_seed(1))
    t, masked = noise["t"], noise["masked"]
    assert t.shape == (4, 200) and 0.1 <= float(t.min()) and float(t.max()) <= 0.9 and float(t.std()) > 0.15
    assert not masked[2, :, 4:].any()  # the tail is never a scored position
    rate = masked[[0, 1, 3]].double().mean(-1)  # each copy's own rate follows its t
    assert torch.corrcoef(torch.stack([rate.flatten(), t[[0, 1, 3]].flatten()]))[0, 1] > 0.6
    seen = []

    class Recording(NetPolicy):
        def token_logp(self, input_ids, *args, **kwargs):
            seen.append(input_ids.clone())
            return super().token_logp(input_ids, *args, **kwargs)

    small = build_estimator("random_masking", {"samples": 3})
    noise = small.draw(batch, torch.Generator().manual_seed(2))
    out = small.estimate(Recording(TinyNet(seed=3)), batch, noise)
    inputs = seen[0].view(3, 4, -1).transpose(0, 1)  # (B, m, P + T)
    prompt = len(FIXTURE["prompt_ids"][0])
    assert (inputs[2, :, prompt + 4:] == MASK_ID).all() and not (inputs[:, :, :prompt] == MASK_ID).any()
    assert torch.equal(inputs[..., prompt:] == MASK_ID, noise["masked"] | ~batch.completion_mask[:, None])
    assert torch.equal(out.token_logp != 0, noise["masked"])
