"""Gold self-consistency through the replay engine: reference answers score 100%; the same answers
rotated by one sample score under 5%. This checks data, prompts, extraction and verifiers together."""

from __future__ import annotations

import pytest

from dare.harness import config
from dare.harness.data import load_samples
from dare.harness.verifiers import verifiers

from .helpers import dare_eval, run_record, write_completions

BENCHMARKS = ["sudoku", "countdown", "aime2024", "aime2025", "gsm8k", "math500"]


def gold_rows(benchmark: str) -> list[tuple[str, str]]:
    spec = config.benchmark(benchmark)
    verifier = verifiers.get(spec.verifier)(**spec.verifier_args)
    try:
        return [(s.id, verifier.gold_completion(s)) for s in load_samples(spec.data)]
    finally:
        verifier.close()


def score(tmp_path, benchmark: str, rows: list[tuple[str, str]], name: str) -> dict:
    path = write_completions(tmp_path / f"{name}.jsonl", rows)
    proc = dare_eval("--backend", "replay", "--suite", benchmark, "--completions", str(path), "--out", str(tmp_path / "runs"))
    _, record = run_record(proc)
    return record


def check(tmp_path, benchmark):
    rows = gold_rows(benchmark)
    assert all(c is not None for _, c in rows)
    gold = score(tmp_path, benchmark, rows, "gold")
    metric = gold["metrics"][benchmark]["accuracy"]
    assert metric["value"] == 1.0 and metric["n"] == len(rows)
    assert gold["counts"][benchmark]["error"] == 0
    rotated = [(rows[i][0], rows[(i + 1) % len(rows)][1]) for i in range(len(rows))]
    wrong = score(tmp_path, benchmark, rotated, "rotated")
    assert wrong["metrics"][benchmark]["accuracy"]["value"] < 0.05


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_gold_answers_score_full_and_rotated_score_low(tmp_path, benchmark):
    check(tmp_path, benchmark)
