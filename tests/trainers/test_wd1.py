"""wd1 against its official loss: fixtures/wd1_official.json holds xiaohangt/wd1@0898985's ``compute_loss`` run on
tests/trainers/official_net.py's TinyNet (fixtures/scripts/make_wd1_fixture.py); the same masks are fed to DARE's
``one_step`` estimator here and the loss and every parameter's gradient must agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.trainers import build_algorithm
from dare.trainers.training.config import resolve_algorithm

from .official_net import NetPolicy, TinyNet, net_batch

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "wd1_official.json").read_text())


def dare_loss(case: dict, settings: dict) -> tuple[float, torch.Tensor, torch.Tensor]:
    """DARE's wd1 loss on the fixture's batch as one micro-batch (its weight-normalised value), the gradient, A."""
    net = TinyNet(seed=3)
    groups = torch.arange(len(FIXTURE["rewards"])) // FIXTURE["group_size"]
    batch = net_batch(torch.tensor(FIXTURE["prompt_ids"]), torch.tensor(FIXTURE["completion_ids"]), groups,
                      torch.tensor(FIXTURE["rewards"]), torch.tensor(FIXTURE["completion_mask"]))
    algo = build_algorithm("wd1", settings)
    algo.bind("bidirectional")
    batch.noise = [{"prompt_masked": torch.tensor(case["prompt_masked"])}]
    batch.advantages = algo.advantages(batch)
    out = algo.loss(NetPolicy(net), batch, 0)
    out.loss.backward()
    return float(out.loss.detach()), net.flat_grad(), batch.advantages


@pytest.mark.parametrize("index, settings", [(0, {}), (1, resolve_algorithm("wd1_pos_only", {})[1]),
                                             (2, {"weights_over": "micro_batch"})],
                         ids=["neg-per-group", "pos-only-preset", "neg-softmax-over-micro-batch"])
def test_wd1_loss_and_gradient_match_the_official_code(index, settings):
    case = FIXTURE["cases"][index]
    loss, grad, adv = dare_loss(case, settings)
    assert torch.allclose(adv.double(), torch.tensor(case["advantages"], dtype=torch.float64), atol=1e-6)
    assert loss == pytest.approx(case["loss"], rel=1e-5, abs=1e-5)
    assert torch.allclose(grad, torch.tensor(case["grad"], dtype=torch.float64), rtol=1e-4, atol=1e-6)


def test_the_softmax_spans_what_the_option_names():
    """Quirk: the official softmax runs over dim 0 of the micro-batch; over two groups it differs from per group."""
    case = FIXTURE["cases"][2]
    loss, _, _ = dare_loss(case, {})  # per group on the same masks
    assert abs(loss - case["loss"]) > 1e-3


def test_equal_advantages_give_zero_loss_and_huge_ones_stay_finite():
    """A group of equal rewards weighs every row alike in both terms (loss 0); |A| = 1e4 stays finite."""
    net = TinyNet(seed=3)
    for rewards, check in (([0.5] * 6, lambda v: v == pytest.approx(0.0, abs=1e-9)),
                           ([1e4, -1e4, 0.0, 3e4, 0.0, -5e3], lambda v: torch.isfinite(torch.tensor(v)))):
        batch = net_batch(torch.tensor(FIXTURE["prompt_ids"]), torch.tensor(FIXTURE["completion_ids"]),
                          torch.arange(6) // 3, torch.tensor(rewards))
        algo = build_algorithm("wd1")
        algo.bind("bidirectional")
        batch.noise = [{"prompt_masked": torch.zeros(6, 5, dtype=torch.bool)}]
        batch.advantages = algo.advantages(batch)
        out = algo.loss(NetPolicy(net), batch, 0)
        out.loss.backward()
        assert check(float(out.loss.detach())) and torch.isfinite(net.flat_grad()).all()


@pytest.mark.parametrize("micro", [1, 2, 4])
def test_micro_batches_that_split_a_group_give_the_whole_batch_gradient(micro):
    """Per-group weights normalise over the whole group however the trainer cuts the batch: micro-batches of 1,
    2 or 4 rows (groups of 3) give the gradient of one micro-batch. Over the rows of a micro-batch alone, one row
    would weigh 1 in both terms and contribute exactly nothing."""
    from dare.trainers.training.trainer import accumulate_gradients

    case = FIXTURE["cases"][0]
    _, whole, _ = dare_loss(case, {})
    net = TinyNet(seed=3)
    groups = torch.arange(len(FIXTURE["rewards"])) // FIXTURE["group_size"]
    batch = net_batch(torch.tensor(FIXTURE["prompt_ids"]), torch.tensor(FIXTURE["completion_ids"]), groups,
                      torch.tensor(FIXTURE["rewards"]), torch.tensor(FIXTURE["completion_mask"]))
    algo = build_algorithm("wd1")
    algo.bind("bidirectional")
    batch.noise = [{"prompt_masked": torch.tensor(case["prompt_masked"])}]
    batch.advantages = algo.advantages(batch)
    total, _ = accumulate_gradients(algo, NetPolicy(net), batch, micro, 0)
    assert total == pytest.approx(len(set(groups.tolist())))
    assert torch.allclose(net.flat_grad() / total, whole, rtol=1e-5, atol=1e-7)
