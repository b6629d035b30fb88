"""wd1, UniGRPO, GDSD and RLDF through ``dare-train``: the evaluation's run.json records the algorithm's resolved
config and estimator (a preset's settings included) and RUN/rollout.json the rollouts' decoding; a family the
paper does not cover is refused in one line (exit 2)."""

from __future__ import annotations

import json

import pytest

from dare.trainers.cli import main
from dare.trainers.training.evaluate import read_eval_marker

SMALL = ["--steps", "1", "--eval-limit", "1", "--set", "prompts_per_step=1", "--set", "group_size=2",
         "--set", "micro_batch_size=2", "--set", "decoding.gen_length=8", "--set", "decoding.steps=4",
         "--set", "decoding.block_length=4", "--set", "decoding.batch_size=2", "--set", "algo.inner_steps=1"]
CASES = [("wd1_pos_only", "wd1", "tiny-sdar", {"negative": False, "weights_over": "group"}, "one_step"),
         ("unigrpo", "unigrpo", "tiny-llada", {"pass_rate_band": None, "kl_to": "old"}, "random_masking"),
         ("gdsd_tlc", "gdsd", "tiny-llada", {"estimator_args": {"weighting": "inverse_rate"}, "clip_low": 4e-4},
          "coupled_denoiser"),
         ("rldf", "rldf", "tiny-llada", {"low_prob_threshold": 0.6, "loss_norm": "token"}, "replay_steps")]


@pytest.mark.parametrize("name, algo, model, expected, estimator", CASES, ids=[c[0] for c in CASES])
def test_the_run_records_the_algorithm_config(name, algo, model, expected, estimator, tmp_path):
    extra = ["--set", "algo.pass_rate_band=null"] if algo == "unigrpo" else []  # 2 rollouts: keep the group
    args = ["--algo", name, "--model", model, "--suite", "sudoku", "--out", str(tmp_path), *SMALL, *extra]
    assert main(args) == 0
    run_dir = next(tmp_path.glob(f"{name}-sudoku-{model}-s0"))
    training = json.loads((read_eval_marker(run_dir) / "run.json").read_text())["model"]["training"]
    assert training["algorithm"] == algo and training["estimator"]["name"] == estimator
    assert {k: training["algorithm_config"][k] for k in expected} == expected
    assert training["rollout"] == json.loads((run_dir / "rollout.json").read_text())


@pytest.mark.parametrize("algo", ["unigrpo", "gdsd", "rldf"])
def test_masked_diffusion_methods_refuse_a_block_diffusion_model_in_one_line(algo, tmp_path, capsys):
    args = ["--algo", algo, "--model", "tiny-sdar", "--suite", "sudoku", "--out", str(tmp_path), *SMALL]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a bidirectional model" in err, err
