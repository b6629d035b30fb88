"""A choice benchmark on a shipped tiny model through the real estimator: what the run records is what the
engine's loglikelihood gives for the question and ' ' + each choice, and the verdict follows from it."""

from __future__ import annotations

import json

import dare
from dare.harness.data import load_rows
from dare.harness.engine import request_seed
from dare.harness.likelihood import LikelihoodRequest


def test_tiny_sdar_scores_sudoku_choices_as_its_engine_does(tmp_path):
    plan = dare.plan(model="tiny-sdar", suite="sudoku_choice", limit=2, out=tmp_path,
                     overrides=["likelihood.mode=exact", "batch_size=8"])
    record = dare.evaluate(plan)
    assert record.benchmarks["sudoku_choice"].estimator.name == "block_elbo"
    rows = [json.loads(line) for line in (plan.run_dir / "samples.jsonl").read_text().splitlines()]
    estimator = plan.choices["sudoku_choice"].estimator
    for row, data in zip(rows, load_rows("sudoku_choice.jsonl")):
        requests = [LikelihoodRequest(f"{row['id']}/{i}", data["query"], " " + choice, request_seed(0, row["id"], i))
                    for i, choice in enumerate(data["choices"])]
        direct = [r.logprob for r in plan.engine.loglikelihood(requests, estimator)]
        assert row["logprobs"] == direct and row["stderrs"] == [0.0] * 4  # exact mode: no sampling error
        assert row["details"]["pred"] == max(range(4), key=direct.__getitem__)
