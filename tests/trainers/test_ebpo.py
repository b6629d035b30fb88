"""EBPO: the all-block stratified composite ELBO (every block masked in every draw, stratified levels, unbiased
on a toy block model), the log-space clip, the refusal of masked-diffusion models, and dare-train end to end."""

from __future__ import annotations

import json
import math

import pytest
import torch

from dare.harness.errors import ConfigError
from dare.trainers import build_algorithm, build_estimator
from dare.trainers.cli import main
from dare.trainers.losses.sequence import log_clipped_ratio

from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)
from .toy import ContextFreePolicy, JointPolicy, make_batch

RESPONSE = [2, 0, 1, 2]


def test_every_draw_masks_every_block_with_stratified_levels():
    est = build_estimator("block_composite_elbo", {"samples": 4})
    batch = make_batch(100, 3, [1] * 14)
    batch.prompt_mask[:50, 0] = False  # left padding shifts the global block grid of half the rows
    batch.completion_mask[:, 12:] = False  # tail: hidden, never scored
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    masked, level, rb = est.cells(batch, noise, block=4)
    assert masked[..., 12:].all()
    for r in (0, 99):
        start = 2 if r == 0 else 3  # prompt of 2 (padded) or 3 tokens: the first response block is partial
        blocks = (torch.arange(12) + start) // 4 - start // 4
        assert torch.equal(rb[r, :12], blocks)
        for b in blocks.unique():
            inside = blocks == b
            counts = masked[r, :, :12][:, inside].sum(-1)
            assert (counts >= 1).all() and (counts <= int(inside.sum())).all()
            share = (counts.double() / int(inside.sum()))[:, None].expand(-1, int(inside.sum()))
            hit = masked[r, :, :12][:, inside]
            assert torch.equal(level[r, :, :12][:, inside][hit], share[hit])  # weight 1/p = B_b / m
    # the four draws of a block take one level in each quarter of [0, 1), so a 4-token block masks 1, 2, 3, 4
    counts = masked[:50, :, 2:6].sum(-1)  # padded rows: response tokens 2..5 fill positions 4..7
    assert torch.equal(counts.sort(-1).values, torch.tensor([1, 2, 3, 4]).expand_as(counts))


def test_composite_elbo_is_unbiased_for_exact_block_conditionals():
    policy = JointPolicy(n=4, vocab=3, block_size=2, seed=3)
    est = build_estimator("block_composite_elbo", {"samples": 2})
    batch = make_batch(8000, 1, RESPONSE)
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        draws = est.estimate(policy, batch, noise).token_logp.double().sum(-1)
    se = float(draws.std() / math.sqrt(len(draws)))
    assert abs(float(draws.mean()) - policy.log_prob(RESPONSE)) < 4.5 * se + 1e-3
    plain = build_estimator("block_elbo", {"samples": 2, "eps": 1e-5})
    with torch.no_grad():
        iid = plain.estimate(policy, batch, plain.draw(batch, torch.Generator().manual_seed(0))).token_logp.sum(-1)
    assert float(draws.var()) < float(iid.double().var())


def test_log_space_clip_equals_the_ppo_formula():
    ratio = torch.exp(torch.linspace(-2, 2, 41, dtype=torch.float64))
    for a in (1.3, -0.8, 0.0):
        adv = torch.full_like(ratio, a)
        naive = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
        clipped = -adv * torch.exp(log_clipped_ratio(ratio.log(), adv, 0.2, 0.2))
        assert torch.allclose(clipped, naive)
    huge = log_clipped_ratio(torch.tensor([800.0]), torch.tensor([1.0]), 0.2, 0.2)
    assert torch.isfinite(torch.exp(huge)).all()  # exp(800) would overflow; the log-space clip never builds it


def test_sequence_ratio_gradient_and_clip():
    algo = build_algorithm("ebpo", {"estimator_args": {"samples": 2}})
    policy = JointPolicy(n=4, vocab=3, block_size=2, seed=0)
    policy.attention = "block_causal"
    algo.bind("block_causal")
    batch = make_batch(2, 1, RESPONSE)
    batch.group_ids = torch.zeros(2, dtype=torch.long)
    batch.rewards = torch.tensor([1.0, 0.0])
    batch.noise = algo.draw_noise(algo.estimator, batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        batch.old_logp = algo.estimator.estimate(policy, batch, batch.noise[0]).token_logp[None]
    batch.advantages = algo.advantages(batch)
    out = algo.loss(policy, batch, 0)
    assert out.metrics["ratio_max_dev"] == 0.0 and out.weight == 2.0
    assert float(out.loss.detach()) == pytest.approx(-float(batch.advantages.mean()))  # rho = 1: loss = mean(-A)
    batch.old_logp = batch.old_logp - 1.0  # E - E_old = 4 tokens x 1: rho = e^4
    out = algo.loss(policy, batch, 0)
    adv = batch.advantages.double()
    # A > 0 clipped at 1 + eps; A < 0 keeps rho (no dual clip in EBPO)
    assert out.metrics["clip_fraction"] == 0.5
    assert float(out.loss.detach()) == pytest.approx(float(-(adv[0] * 1.2 + adv[1] * math.exp(4)) / 2), rel=1e-5)


def test_masked_diffusion_models_are_refused_with_a_config_error():
    with pytest.raises(ConfigError, match="needs a block-causal model"):
        build_algorithm("ebpo").bind("bidirectional")
    with pytest.raises(ValueError, match="block-diffusion"):
        est = build_estimator("block_composite_elbo", {})
        batch = make_batch(1, 1, RESPONSE)
        est.estimate(ContextFreePolicy(n=4), batch, est.draw(batch, torch.Generator()))


def test_ebpo_trains_two_steps_end_to_end(tiny, tmp_path, digits_suite):  # noqa: F811
    args = ["--algo", "ebpo", "--model-path", str(tiny["sdar"]), "--suite", digits_suite, "--out", str(tmp_path),
            *FAST, "--set", "rollout.temperature=1.0", "--set", "algo.estimator_args={samples: 2}"]
    assert main(args) == 0
    lines = (tmp_path / f"ebpo-{digits_suite}-sdar-s0" / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines]
    assert [r["step"] for r in rows] == [1, 2] and all(math.isfinite(r["loss"]) for r in rows)
    assert rows[0]["first_inner_ratio_max_dev"] == 0.0 and any(r["grad_norm"] > 0 for r in rows)


@pytest.mark.parametrize("algo, arch, message", [("ebpo", "llada", "needs a block-causal model"),
                                                 ("spg", "sdar", "needs a bidirectional model")])
def test_dare_train_refuses_an_unsupported_family_in_one_line(tiny, tmp_path, capsys, algo, arch, message):
    args = ["--algo", algo, "--model-path", str(tiny[arch]), "--suite", "sudoku", "--out", str(tmp_path), *FAST]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err
