"""Every registered algorithm on both shipped tiny models: two steps of `dare-train` with three inner updates
each (finite losses, no update skipped) and an auto-evaluation run where the paper allows the model family,
a one-line error naming the family where it does not."""

from __future__ import annotations

import json
import math

import pytest

from dare.harness.registry import algorithms
from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms)
from dare.trainers.cli import main
from dare.trainers.training.evaluate import read_eval_marker

SMALL = ["--steps", "2", "--eval-limit", "2", "--set", "prompts_per_step=1", "--set", "group_size=2",
         "--set", "micro_batch_size=2", "--set", "decoding.gen_length=8", "--set", "decoding.steps=8",
         "--set", "decoding.block_length=4", "--set", "decoding.batch_size=2", "--set", "algo.inner_steps=3"]
FAMILY = {"tiny-llada": "bidirectional", "tiny-sdar": "block_causal"}


#: run by default (a masked-only, a block-capable and a preference algorithm); the others under -m extended
QUICK = {"d1", "coupled_grpo", "dpo"}


def _names() -> list:
    return [pytest.param(n, marks=() if n in QUICK else pytest.mark.extended)
            for n in sorted({algorithms.get(n).name for n in algorithms.names()})]


@pytest.mark.parametrize("model", sorted(FAMILY))
@pytest.mark.parametrize("algo", _names())
def test_every_algorithm_trains_and_evaluates_or_names_the_family(algo, model, tmp_path, capsys):
    args = ["--algo", algo, "--model", model, "--suite", "sudoku", "--out", str(tmp_path), *SMALL]
    needs = algorithms.get(algo).needs.attention
    if algo == "just_grpo":  # its likelihood scores at the rollouts' sampling temperature (1.0, JustGRPO's)
        args += ["--set", "rollout.temperature=1.0"]
    code = main(args)
    err = capsys.readouterr().err
    if needs and needs != FAMILY[model]:
        assert code == 2 and err.count("\n") == 1 and f"needs a {needs.replace('_', '-')} model" in err, err
        return
    assert code == 0, err
    run_dir = tmp_path / f"{algo}-sudoku-{model}-s0"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:  # several inner updates per step, each finite (the ratio leaves 1 after the first)
        assert math.isfinite(r["loss"]) and math.isfinite(r["grad_norm"]) and r["skipped_nonfinite"] == 0, r
    record = json.loads((read_eval_marker(run_dir) / "run.json").read_text())
    assert record["status"] == "complete" and record["model"]["training"]["algorithm"] == algo
    assert record["metrics"]["sudoku"]["accuracy"]["n"] == 2
