"""GDSD against its official loss: fixtures/gdsd_official.json holds GaryBall/GDSD@3fb6780's ``compute_loss`` (and
GDSD-TLC's likelihood) run on tests/trainers/official_net.py's TinyNet (fixtures/scripts/make_gdsd_fixture.py).
Fed the same masks, DARE's ``coupled_denoiser`` must give the same sequence log-likelihoods under the current, old
and reference networks, and ``denoiser_regression`` the same loss and gradient."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.trainers import build_algorithm, build_estimator
from dare.trainers.training.config import resolve_algorithm

from .official_net import NetPolicy, TinyNet, net_batch

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "gdsd_official.json").read_text())
CASES = {c["name"]: c for c in FIXTURE["cases"]}


def run(case: dict, mutate: dict | None = None):
    """DARE's GDSD loss on the fixture case: (loss, gradient, sequence log-likelihoods (B, n) of new / old / ref)."""
    tlc = case["weighting"] == "inverse_rate"
    net = TinyNet(seed=3)
    old_net, ref_net = net.nudged(case["old_nudge"], 41), net.nudged(0.05, 43)
    if tlc:
        net, old_net, ref_net = net.float(), old_net.float(), ref_net.float()
    completion = torch.tensor(FIXTURE["completion_ids"])
    batch = net_batch(torch.tensor(FIXTURE["prompt_ids"]), completion, torch.zeros(4, dtype=torch.long),
                      torch.tensor(FIXTURE["rewards"]))
    name, settings = resolve_algorithm("gdsd_tlc" if tlc else "gdsd", {})
    settings = {**settings, "clip_low": case["epsilon"], "clip_high": case["epsilon"], "beta": case["beta"],
                "psi": case["psi"], **(mutate or {})}
    settings["estimator_args"] = {**settings.get("estimator_args", {}), "samples": case["num_mc"]}
    algo = build_algorithm(name, settings)
    algo.bind("bidirectional")
    masked = torch.tensor(case["masked"])
    batch.noise = [{"masked": masked, "counts": masked.sum(-1).double(),
                    "lv": torch.full((4, 1), float(completion.shape[1]), dtype=torch.float64)}]
    with torch.no_grad():
        batch.old_logp = algo.estimator.estimate(NetPolicy(old_net), batch, batch.noise[0]).token_logp[None]
        batch.ref_logp = algo.estimator.estimate(NetPolicy(ref_net), batch, batch.noise[0]).token_logp[None]
    batch.advantages = algo.advantages(batch)
    out = algo.loss(NetPolicy(net), batch, 0)
    out.loss.backward()
    with torch.no_grad():
        new = algo.estimator.estimate(NetPolicy(net), batch, batch.noise[0]).token_logp.sum(-1)
    sums = {"new": new, "old": batch.old_logp[0].sum(-1), "ref": batch.ref_logp[0].sum(-1)}
    return float(out.loss.detach()), net.flat_grad().double(), sums, batch.advantages


@pytest.mark.parametrize("name", sorted(CASES))
def test_gdsd_loss_gradient_and_likelihoods_match_the_official_code(name):
    case = CASES[name]
    loss, grad, sums, adv = run(case)
    tol = {"rtol": 1e-4, "atol": 1e-5}  # the official buffers are float32
    assert torch.allclose(adv.double(), torch.tensor(case["advantages"], dtype=torch.float64), atol=1e-6)
    for key, ours in (("sequence_logp", sums["new"]), ("old_sequence_logp", sums["old"]),
                      ("ref_sequence_logp", sums["ref"])):
        assert torch.allclose(ours.double(), torch.tensor(case[key], dtype=torch.float64), **tol), key
    assert loss == pytest.approx(case["loss"], rel=1e-4)
    assert torch.allclose(grad, torch.tensor(case["grad"], dtype=torch.float64), **tol)


def test_outside_the_clamp_band_the_gradient_is_zero():
    """Quirk: every draw's log-ratio lies outside [log(1 - 4e-4), log(1 + 4e-4)] and beta = 0: nothing trains,
    in the official code and here; without the clamp the same batch trains."""
    case = CASES["outside-band-no-kl"]
    assert not any(torch.tensor(case["grad"]).abs() > 0)
    _, grad, _, _ = run(case)
    assert (grad == 0).all()
    _, grad, _, _ = run(case, {"clip_low": 0.9, "clip_high": 10.0})
    assert grad.abs().max() > 1e-3


def test_coupled_denoiser_strata_spread_over_the_batch_rows_and_halves_cover_every_token():
    est = build_estimator("coupled_denoiser", {"samples": 3})
    completion = torch.randint(0, 9, (5, 9), generator=torch.Generator().manual_seed(0))
    batch = net_batch(torch.zeros(5, 2, dtype=torch.long), completion, torch.zeros(5, dtype=torch.long),
                      torch.zeros(5))
    noise = est.draw(batch, torch.Generator().manual_seed(3))
    counts = noise["counts"]  # (B, n): row b masks round(k + b (L + 1) / B) mod (L + 1)
    for j in range(3):
        k = counts[0, j]
        assert counts[:, j].tolist() == [float(torch.round(k + b * 10 / 5) % 10) for b in range(5)]
    assert torch.equal(noise["masked"].sum(-1).double(), counts)
    out = est.estimate(NetPolicy(TinyNet(seed=1)), batch, noise).token_logp  # every token scored once per draw
    assert out.shape == (5, 3, 9) and (out < 0).all()
