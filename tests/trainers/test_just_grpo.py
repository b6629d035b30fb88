"""JustGRPO: left-to-right rollouts, the exact autoregressive likelihood (brute force, temperature once, equal
to the replay of the recorded step map), its guards, and dare-train end to end."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from dare.harness.records import DecodingConfig
from dare.trainers import build_estimator
from dare.trainers.api import build_algorithm
from dare.trainers.cli import main
from dare.trainers.training.policy import ModelPolicy
from dare.trainers.training.sequences import build_layout, key_mask

from .test_cj_grpo import _rollout
from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)

LLADA = SimpleNamespace(attention="bidirectional", decoding_family="mdm")


def _left_to_right_rollout(path, temperature=0.6):
    base = DecodingConfig(gen_length=8, steps=8, block_length=8, temperature=0.0, num_samples=2, batch_size=4)
    algo = build_algorithm("just_grpo", {"temperature": temperature})
    decoding = base.model_copy(update=algo.rollout_decoding(base, LLADA))
    algo.check_rollout(decoding)
    engine, batch, _ = _rollout(path, decoding)
    return algo, engine, batch, decoding


def test_rollouts_commit_one_token_per_step_left_to_right(tiny):
    _, _, batch, decoding = _left_to_right_rollout(tiny["llada"])
    assert decoding.block_length == 1 and decoding.steps == 8 and decoding.temperature == 0.6
    order = torch.arange(8).expand_as(batch.commit_step)
    assert torch.equal(batch.commit_step, order)  # the step map JustGRPO's estimator assumes


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_autoregressive_likelihood_matches_brute_force_and_the_recorded_replay(tiny, temperature):
    algo, engine, batch, _ = _left_to_right_rollout(tiny["llada"], temperature)
    policy = ModelPolicy(engine.model, None)
    estimator = algo.bind(policy.attention)
    assert estimator.name == "autoregressive" and estimator.temperature == temperature
    seen = []  # inputs of every forward: position t must see exactly t response tokens
    inner = policy.token_logp

    def recording(input_ids, *args, **kwargs):
        seen.append(input_ids.clone())
        return inner(input_ids, *args, **kwargs)

    policy.token_logp = recording
    with torch.no_grad():
        got = estimator.estimate(policy, batch, {}).token_logp
    layout = build_layout(batch)
    visible = sorted(int((x[layout.response] != policy.mask_id).sum())
                     for chunk in seen for x in chunk)
    assert visible == sorted(list(range(8)) * batch.size)
    with torch.no_grad():
        replay = build_estimator("mdm_trajectory", {"temperature": temperature}).estimate(policy, batch, {})
    assert torch.allclose(got, replay.token_logp, atol=1e-6)
    for row in range(batch.size):
        for t in range(8):
            x = layout.tokens[row:row + 1].clone()
            x[0, layout.response.start + t:layout.response.stop] = policy.mask_id
            logits = engine.model.net(x, layout.positions[row:row + 1], key_mask(layout.valid[row:row + 1]))
            logp = (logits[0, layout.response.start + t] / temperature).log_softmax(-1)
            assert float(got[row, t]) == pytest.approx(float(logp[batch.completion_ids[row, t]]), abs=1e-5)


def test_rollout_settings_the_likelihood_cannot_score_are_refused(tiny, tmp_path, capsys):
    base = ["--model-path", str(tiny["llada"]), "--suite", "sudoku", "--out", str(tmp_path), *FAST]
    assert main(["--algo", "just_grpo", *base, "--set", "rollout.temperature=0.6"]) == 2
    assert "set algo.temperature=0.6 instead of rollout.temperature" in capsys.readouterr().err
    assert main(["--algo", "just_grpo", *base, "--set", "rollout.block_length=4"]) == 2
    assert "left-to-right rollouts" in capsys.readouterr().err
    sdar = ["--model-path", str(tiny["sdar"]), "--suite", "sudoku", "--out", str(tmp_path), *FAST]
    assert main(["--algo", "just_grpo", *sdar, "--set", "rollout.temperature=1.0"]) == 2
    assert "needs a bidirectional model" in capsys.readouterr().err


@pytest.mark.extended
def test_just_grpo_trains_two_steps_end_to_end(tiny, tmp_path, digits_suite):  # noqa: F811
    args = ["--algo", "just_grpo", "--model-path", str(tiny["llada"]), "--suite", digits_suite,
            "--out", str(tmp_path), *FAST, "--set", "algo.temperature=1.0", "--set", "rollout.temperature=1.0"]
    assert main(args) == 0
    rows = [json.loads(line) for line in
            (tmp_path / f"just_grpo-{digits_suite}-llada-s0" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and rows[0]["first_inner_ratio_max_dev"] == 0.0
    assert all(r["nfe"] == 8 for r in rows)  # one forward per token: gen_length 8
