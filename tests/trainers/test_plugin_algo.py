"""The worked example "add an RL algorithm in one file" (tests/trainers/plugin_algo.py): imported, its loss and
algorithm are registered, and dare-train runs it end to end through the real trainer."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from dare.harness import registry
from dare.trainers.cli import main

from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)

MODULE = "tests.trainers.plugin_algo"


@pytest.fixture
def toy_algorithm():
    saved = registry.algorithms.snapshot(), registry.losses.snapshot()
    module = importlib.import_module(MODULE)
    yield module
    registry.algorithms.restore(saved[0])
    registry.losses.restore(saved[1])
    sys.modules.pop(MODULE, None)


def test_a_one_file_algorithm_registers_its_loss_and_trains(toy_algorithm, tiny, tmp_path, digits_suite):  # noqa: F811
    assert registry.losses.get("toy/reinforce_elbo") is toy_algorithm.reinforce_elbo
    assert registry.algorithms.get("toy/reinforce") is toy_algorithm.ToyReinforce
    args = ["--algo", "toy/reinforce", "--model-path", str(tiny["llada"]), "--suite", digits_suite,
            "--out", str(tmp_path), "--run-name", "toy", *FAST, "--set", "rollout.temperature=1.0"]
    assert main(args) == 0
    rows = [json.loads(line) for line in (tmp_path / "toy" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert "toy_elbo" in rows[-1] and rows[0]["grad_norm"] > 0
    assert (tmp_path / "toy" / "checkpoints" / "step-000002").is_dir()


def test_its_config_is_typed_like_the_built_ins(toy_algorithm):
    from dare.harness.errors import ConfigError
    from dare.trainers import build_algorithm

    with pytest.raises(ConfigError, match="did you mean 'rloo'"):
        build_algorithm("toy/reinforce", {"advantage": "rlo"})
    with pytest.raises(ConfigError, match="antithetc"):
        build_algorithm("toy/reinforce", {"estimator_args": {"antithetc": True}})
