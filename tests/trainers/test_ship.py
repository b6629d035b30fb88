"""python -m dare.trainers.experiments.ship: a run's final checkpoint as a shipped model folder, with every stage's
recipe and log beside the weights."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from dare.harness.errors import ConfigError
from dare.trainers.cli import main
from dare.trainers.experiments.ship import ship

FAST = ["--no-eval", "--no-progress", "--set", "prompts_per_step=1", "--set", "micro_batch_size=1", "--suite", "sudoku"]


def test_a_two_stage_model_ships_the_final_weights_and_both_recipes(tiny, tmp_path):
    first, second = tmp_path / "runs" / "one", tmp_path / "runs" / "two"
    assert main(["--algo", "sft", "--model-path", str(tiny["llada"]), "--steps", "1", "--out", str(first.parent),
                 "--run-name", "one", *FAST]) == 0
    stage1 = first / "checkpoints" / "step-000001"
    assert main(["--algo", "sft", "--model-path", str(stage1), "--steps", "2", "--out", str(second.parent),
                 "--run-name", "two", "--set", "lr=0.02", *FAST]) == 0
    shipped = ship(second, tmp_path / "model", after=(first,))
    weights = load_file(shipped / "model.safetensors")
    final = load_file(second / "checkpoints" / "step-000002" / "model.safetensors")
    assert weights.keys() == final.keys()
    assert all(w.dtype == torch.bfloat16 and torch.equal(w, final[k].to(torch.bfloat16))
               for k, w in weights.items() if final[k].is_floating_point())
    assert json.loads((shipped / "training_config.json").read_text())["config"]["steps"] == 2
    stage = json.loads((shipped / "training_stage1_config.json").read_text())["config"]
    assert stage["steps"] == 1 and stage["model_path"] == str(tiny["llada"])
    assert len((shipped / "training_stage1_log.jsonl").read_text().splitlines()) == 1
    assert len((shipped / "training_log.jsonl").read_text().splitlines()) == 2
    # shipping again as a single stage leaves no stale stage files behind
    ship(second, shipped)
    assert not list(shipped.glob("training_stage*"))


def test_an_earlier_stage_must_be_a_run(tiny, tmp_path):
    with pytest.raises(ConfigError, match="not a dare-train run"):
        ship(tmp_path, tmp_path / "model", after=(tmp_path / "nothing",))
