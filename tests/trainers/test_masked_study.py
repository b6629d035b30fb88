"""The masked-diffusion study's measurements (trainers/README.md, "Masked diffusion at this scale"): the
zero-variance group shares every RL run records per step, and the held-out probe around one training step."""

from __future__ import annotations

import json
import math

import pytest
import torch

from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms)
from dare.trainers.experiments.masked_study import HELD_OUT, StepEffect, _HeldOutProbe, centred, group_signal
from dare.trainers.experiments.uphill import measure, settings
from dare.trainers.training.rollout import zero_variance_groups


def test_zero_variance_groups_counts_groups_whose_rows_all_agree():
    # three prompts x 4 rollouts: rewards equal in groups 0 and 2; solved all-or-none in group 0 only
    rewards = torch.tensor([0.5, 0.5, 0.5, 0.5, 0.2, 0.4, 0.2, 0.2, 1.0, 1.0, 1.0, 1.0])
    passed = torch.tensor([0, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0], dtype=torch.bool)
    out = zero_variance_groups(rewards, passed, 4)
    assert out == {"zero_variance_groups": pytest.approx(2 / 3), "zero_variance_groups_solved": pytest.approx(1 / 3)}
    # grouped by 2 instead (the wrong k) the same rows give other shares
    assert zero_variance_groups(rewards, passed, 2)["zero_variance_groups"] == pytest.approx(5 / 6)
    assert zero_variance_groups(rewards, passed, 1) == {} and zero_variance_groups(rewards[:10], passed[:10], 4) == {}


def test_centred_subtracts_each_groups_own_mean():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.5, 0.5, 0.8])
    assert centred(rewards, 3).tolist() == pytest.approx([2 / 3, -1 / 3, -1 / 3, -0.1, -0.1, 0.2])


@pytest.mark.extended
def test_a_training_run_records_the_group_shares_per_step(tmp_path):
    from dare.trainers.training.trainer import LocalTrainer

    config = settings("d1", "tiny-llada", prompts=2, group=4).model_copy(update={"steps": 2})
    trainer = LocalTrainer(config, tmp_path)
    trainer.train()
    trainer.verifiers.close()
    rows = group_signal(tmp_path)
    assert len(rows) == 2
    for row in rows:
        assert 0 <= row["zero_variance_groups"] <= row["zero_variance_groups_solved"] <= 1
        assert row["zero_variance_groups"] in (0.0, 0.5, 1.0)  # two prompts
    raw = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert "zero_variance_groups" in raw


@pytest.mark.extended
def test_held_out_probe_replays_other_prompts_around_the_step(tmp_path):
    """The held-out rows are decoded from the next steps' prompts, scored, and replayed before and after."""
    config = settings("d1", "tiny-llada", prompts=2, group=4)
    u = measure("d1", "tiny-llada", config=config, trainer_cls=_HeldOutProbe, run_dir=tmp_path)
    held = u.held_out
    rows = HELD_OUT * 2 * 4
    assert held["held_before"].shape == held["held_after"].shape == (rows,)
    assert torch.isfinite(held["held_before"]).all() and (held["held_before"] < 0).all()
    # the step moved the policy on rows it did not train on, and the held-out advantages are group-centred
    assert (held["held_after"] - held["held_before"]).abs().max() > 1e-4
    assert held["held_advantages"].view(-1, 4).sum(1).abs().max() < 1e-9
    effect = StepEffect(0, u)
    assert effect.held_shift == pytest.approx(float((held["held_after"] - held["held_before"]).mean()))
    assert not any(math.isnan(v) for v in (*effect.before, *effect.after, effect.held_gap))  # both signs present
    assert not torch.equal(held["held_before"][:8], u.before)  # other rollouts than the trained batch
