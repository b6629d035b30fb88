"""Rollouts are checked and recorded as evaluations are: a typo in ``rollout_decoding`` exits 2 before the
first step, and an algorithm's typed rollout additions appear in RUN/rollout.json and the run.json of the
evaluation of the trained checkpoint."""

from __future__ import annotations

import json

from dare.trainers.cli import main
from dare.trainers.training.evaluate import read_eval_marker

SMALL = ["--steps", "1", "--set", "prompts_per_step=1", "--set", "group_size=2", "--set", "micro_batch_size=2",
         "--set", "decoding.gen_length=8", "--set", "decoding.steps=8", "--set", "decoding.block_length=8",
         "--set", "algo.inner_steps=1", "--set", "rollout.temperature=1.0"]


def test_a_typo_in_rollout_decoding_exits_2_before_the_first_step(tmp_path, capsys):
    args = ["--algo", "d1", "--model", "tiny-llada", "--suite", "sudoku", "--out", str(tmp_path), *SMALL,
            "--no-eval", "--set", "rollout.extra={eos_gama: [0.01, 1.0]}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rollout_decoding" in err and "did you mean 'eos_gamma'" in err, err
    run_dir = tmp_path / "d1-sudoku-tiny-llada-s0"
    assert not (run_dir / "metrics.jsonl").exists() and not (run_dir / "checkpoints").exists()


def test_a_field_the_rollout_decoder_does_not_read_exits_2(tmp_path, capsys):
    args = ["--algo", "d1", "--model", "tiny-llada", "--suite", "sudoku", "--out", str(tmp_path), *SMALL,
            "--no-eval", "--set", "rollout.alg_temp=0.5"]  # Dream's option: LLaDA's decoder does not read it
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "rollout_decoding" in err and "alg_temp=0.5 is not read by decoder" in err, err
    assert not (tmp_path / "d1-sudoku-tiny-llada-s0" / "metrics.jsonl").exists()


def test_cj_grpo_rollout_additions_are_in_rollout_json_and_run_json(tmp_path):
    args = ["--algo", "cj_grpo", "--model", "tiny-llada", "--suite", "sudoku", "--out", str(tmp_path), *SMALL,
            "--eval-limit", "2"]
    assert main(args) == 0
    run_dir = tmp_path / "cj_grpo-sudoku-tiny-llada-s0"
    recorded = json.loads((run_dir / "rollout.json").read_text())
    additions = {"model": "CJGRPORollout", "block_length": 8, "steps": 3, "eos_gamma": [0.01, 1.0],
                 "step_schedule": "ascending"}
    assert recorded["algorithm_additions"] == additions
    assert recorded["decoding"]["extra"] == {"eos_gamma": [0.01, 1.0], "step_schedule": "ascending"}
    assert recorded["decoding"]["steps"] == 3 and recorded["decoder_options"]["step_schedule"] == "ascending"
    record = json.loads((read_eval_marker(run_dir) / "run.json").read_text())
    assert record["model"]["training"]["rollout"] == recorded
    assert record["model"]["training"]["estimator"]["name"] == "mdm_trajectory"  # "auto" for masked diffusion
    assert record["decoding"]["steps"] == 8 and not record["decoding"].get("extra")  # evaluation: the suite's
