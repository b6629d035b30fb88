"""d-TreeRPO through dare-train: listed, one step on tiny-llada with its tree recorded in RUN/rollout.json and the
evaluation's run.json, a one-line refusal on tiny-sdar (masked diffusion only) and under --engine verl."""

from __future__ import annotations

import json
import math

import pytest

from dare.harness.errors import ConfigError
from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms)
from dare.trainers.cli import main
from dare.trainers.training.config import TrainConfig
from dare.trainers.training.evaluate import read_eval_marker

SMALL = ["--steps", "1", "--set", "prompts_per_step=2", "--set", "micro_batch_size=20", "--set",
         "decoding.gen_length=32", "--set", "decoding.steps=8", "--set", "algo.inner_steps=2",
         "--set", "rollout.temperature=2.0"]


def test_listed(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "d_treerpo (rollout, bidirectional models)" in out and "tree_transition" in out and "tree_sibling" in out


@pytest.mark.extended
def test_one_step_on_tiny_llada_records_its_tree(tmp_path):
    args = ["--algo", "d_treerpo", "--model", "tiny-llada", "--suite", "sudoku", "--out", str(tmp_path), *SMALL,
            "--eval-limit", "2"]
    assert main(args) == 0
    run_dir = tmp_path / "d_treerpo-sudoku-tiny-llada-s0"
    row = json.loads((run_dir / "metrics.jsonl").read_text())
    assert row["skipped_nonfinite"] == 0 and all(math.isfinite(row[k]) for k in ("loss", "grad_norm", "sd_kl"))
    assert row["nfe"] == 8  # a leaf's path: one uninterrupted decode
    assert row["grad_norm"] > 0 and row["reward_std"] > 0  # leaves differ, so edges carry advantages
    recorded = json.loads((run_dir / "rollout.json").read_text())
    assert recorded["rollout_mode"] == {"mode": "tree", "trees": 4, "branch": 4, "contraction": 2,
                                        "branch_steps": [0, 4, 8], "leaves_per_prompt": 16,
                                        "segments_per_prompt": 20, "forwards_per_prompt": 80}
    assert recorded["algorithm_additions"] == {"model": "TreeRollout", "num_samples": 16, "temperature": 0.9}
    assert recorded["decoding"]["num_samples"] == 16 and recorded["decoding"]["temperature"] == 2.0  # user wins
    record = json.loads((read_eval_marker(run_dir) / "run.json").read_text())
    assert record["model"]["training"]["rollout"] == recorded
    assert record["model"]["training"]["estimator"]["name"] == "tree_transition"


def test_tiny_sdar_is_refused_in_one_line(tmp_path, capsys):
    args = ["--algo", "d_treerpo", "--model", "tiny-sdar", "--suite", "sudoku", "--out", str(tmp_path), *SMALL]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a bidirectional model" in err, err


def test_a_threshold_rollout_is_refused_before_the_first_step(tmp_path, capsys):
    args = ["--algo", "d_treerpo", "--model", "tiny-llada", "--suite", "sudoku", "--out", str(tmp_path), *SMALL,
            "--no-eval", "--set", "rollout.threshold=0.9"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fixed-step schedule" in err, err
    assert not (tmp_path / "d_treerpo-sudoku-tiny-llada-s0" / "metrics.jsonl").exists()


def test_engine_verl_refuses_the_tree_rollout_before_loading(tmp_path):
    from dare.trainers.verl.trainer import VerlTrainer

    config = TrainConfig(algorithm="d_treerpo", suite="sudoku", model="tiny-llada", engine="verl", steps=1)
    with pytest.raises(ConfigError, match="--engine verl cannot run 'd_treerpo': its own rollout"):
        VerlTrainer(config, tmp_path)
