"""A third-party algorithm, shipped as a real distribution on disk (a .dist-info with a ``dare.plugins``
entry point on the import path), is discovered by the registry and trained with by dare-train."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from dare.harness import registry
from dare.trainers.cli import main

from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)

MODULE = textwrap.dedent('''
    """REINFORCE with a leave-one-out baseline on a sequence ELBO: the whole plugin is this file."""
    import torch
    from dare.trainers import Algorithm, AlgorithmConfig, LossOutput, Needs, algorithm, ops

    class ReinforceConfig(AlgorithmConfig):
        estimator: str = "mc_elbo"
        estimator_args: dict = {"samples": 2, "antithetic": True}

    @algorithm("myalgos/reinforce")
    class Reinforce(Algorithm):
        """REINFORCE (RLOO baseline) on the antithetic Monte-Carlo ELBO."""
        needs = Needs(rollout=True)
        Config = ReinforceConfig
        calls = 0

        def advantages(self, batch):
            return ops.rloo_advantages(batch.rewards, batch.group_ids)

        def loss(self, policy, batch, inner_step):
            type(self).calls += 1
            est = self.estimator.estimate(policy, batch, batch.noise[0])
            seq = (est.token_logp * batch.completion_mask).sum(-1)
            loss = -(batch.advantages * seq).mean()
            return LossOutput(loss=loss, weight=float(batch.size), metrics={"plugin_calls": float(type(self).calls)})
''')


def make_distribution(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "myalgos.py").write_text(MODULE)
    info = root / "myalgos-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myalgos\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[dare.plugins]\nmyalgos = myalgos\n")
    return root


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    saved = registry.algorithms.snapshot(), registry.estimators.snapshot()
    monkeypatch.syspath_prepend(str(make_distribution(tmp_path / "site")))
    monkeypatch.setattr(registry, "_loaded_groups", set())  # a fresh process would scan the groups anew
    yield
    registry.algorithms.restore(saved[0])
    registry.estimators.restore(saved[1])
    sys.modules.pop("myalgos", None)


def test_plugin_algorithm_is_listed_and_trains(installed_plugin, tiny, tmp_path, digits_suite, capsys):  # noqa: F811
    assert main(["--list"]) == 0
    assert "myalgos/reinforce" in capsys.readouterr().out
    args = ["--algo", "myalgos/reinforce", "--model-path", str(tiny["llada"]), "--suite", digits_suite,
            "--out", str(tmp_path), "--run-name", "plugin", *FAST, "--set", "rollout.temperature=1.0"]
    assert main(args) == 0
    rows = [json.loads(line) for line in (tmp_path / "plugin" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[-1]["plugin_calls"] >= 2 and rows[0]["grad_norm"] > 0
