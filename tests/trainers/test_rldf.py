"""RLDF against ant-research/Drift@7abd99b: fixtures/rldf_official.json holds the steps Drift's
``build_masking_schedule`` selects for given seeds and temperatures, and ``DriftTrainer._compute_loss``'s loss and
gradient on tests/trainers/official_net.py's TinyNet (fixtures/scripts/make_rldf_fixture.py). DARE's
``replay_steps`` draw must select the same steps from the same seed, and ``replay_pg`` give the same loss and
gradient. Drift numbers steps from 1, DARE's step maps from 0."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from dare.trainers import build_algorithm, build_estimator
from dare.trainers.losses.replay import kept_tokens

from .official_net import NetPolicy, TinyNet, net_batch

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "rldf_official.json").read_text())
CASES = {c["name"]: c for c in FIXTURE["cases"]}


def fixture_batch():
    batch = net_batch(torch.tensor(FIXTURE["prompt_ids"]), torch.tensor(FIXTURE["completion_ids"]),
                      torch.tensor([0, 0, 1, 1]), torch.tensor(FIXTURE["rewards"]),
                      torch.tensor(FIXTURE["completion_mask"]))
    batch.commit_step = torch.tensor(FIXTURE["step_map"]) - 1
    batch.extras["commit_logp"] = torch.tensor(FIXTURE["token_probs"], dtype=torch.float64).log()
    return batch


@pytest.mark.parametrize("selection", FIXTURE["selection"], ids=lambda s: f"T{s['temperature']}-seed{s['seed']}")
def test_steps_are_drawn_as_drift_draws_them(selection):
    est = build_estimator("replay_steps", {"selection_temperature": selection["temperature"]})
    steps = est.draw(fixture_batch(), torch.Generator().manual_seed(selection["seed"]))["steps"]
    assert (steps + 1).tolist() == selection["selected_steps"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_rldf_loss_and_gradient_match_drift(name):
    case = CASES[name]
    net = TinyNet(seed=3)
    batch = fixture_batch()
    algo = build_algorithm("rldf", {"inner_steps": case["num_iterations"], "loss_norm": case["loss_norm"],
                                    "beta": case["beta"], "low_prob_threshold": case["low_prob_threshold"]})
    algo.bind("bidirectional")
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(case["seed"]))
    assert (batch.noise[0]["steps"] + 1).tolist() == case["selected_steps"]
    with torch.no_grad():
        for key, seed in (("old_logp", 61), ("ref_logp", 62)):
            other = NetPolicy(net.nudged(0.05, seed))
            setattr(batch, key, algo.estimator.estimate(other, batch, batch.noise[0]).token_logp[None])
    batch.advantages = algo.advantages(batch)
    assert batch.advantages.tolist() == pytest.approx(case["advantages"])
    out = algo.loss(NetPolicy(net), batch, 0)
    out.loss.backward()
    assert float(out.loss.detach()) == pytest.approx(case["loss"], rel=1e-5, abs=1e-7)  # Drift: float32 log-softmax
    assert torch.allclose(net.flat_grad(), torch.tensor(case["grad"], dtype=torch.float64), rtol=1e-4, atol=1e-6)


def test_the_filter_keeps_the_tokens_committed_at_the_step():
    """Quirk: below the threshold a replayed token is dropped unless the replayed step committed it."""
    hidden = torch.tensor([[[True, True, True, False]]])
    now = torch.tensor([[[True, False, False, False]]])
    judged = torch.log(torch.tensor([[[0.1, 0.1, 0.9, 0.01]]]))
    assert kept_tokens(hidden, now, judged, 0.6).tolist() == [[[True, False, True, False]]]
    assert kept_tokens(hidden, now, judged, 0.0).tolist() == hidden.tolist()


def test_replayed_inputs_mask_what_was_still_masked_and_dummy_steps_score_nothing():
    seen = []

    class Recording(NetPolicy):
        def token_logp(self, input_ids, *args, **kwargs):
            seen.append(input_ids.clone())
            return super().token_logp(input_ids, *args, **kwargs)

    batch = fixture_batch()
    batch.commit_step[3] = -1  # a row that committed nothing counted: dummy steps only
    est = build_estimator("replay_steps", {"steps_per_forward": 64})
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    assert noise["steps"][3].tolist() == [-1] * 4
    out = est.estimate(Recording(TinyNet(seed=3)), batch, noise).token_logp
    inputs = seen[0].view(4, 4, -1)[..., 3:]  # (B, K, T) completion part
    commit, steps = batch.commit_step, noise["steps"]
    for b in range(3):
        for k in range(4):
            expect = (commit[b] >= steps[b, k]) | (commit[b] < 0)
            assert torch.equal(inputs[b, k] == 11, expect)
            assert torch.equal(out[b, k] != 0, expect & batch.completion_mask[b])
    assert (out[3] == 0).all() and math.isfinite(float(out.detach().sum()))


@pytest.mark.parametrize("inner_steps", [1, 2])
@pytest.mark.parametrize("offset", [-100.0, 100.0])
def test_the_loss_is_finite_at_log_ratios_of_plus_and_minus_100(inner_steps, offset):
    net = TinyNet(seed=3)
    batch = fixture_batch()
    algo = build_algorithm("rldf", {"inner_steps": inner_steps})
    algo.bind("bidirectional")
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        est = algo.estimator.estimate(NetPolicy(net), batch, batch.noise[0]).token_logp[None]
    batch.old_logp, batch.ref_logp = est - offset, est + offset
    batch.advantages = algo.advantages(batch)
    out = algo.loss(NetPolicy(net), batch, 0)
    out.loss.backward()
    assert torch.isfinite(out.loss) and torch.isfinite(net.flat_grad()).all()
