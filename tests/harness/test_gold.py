"""Gold self-consistency through the replay engine: reference answers score 100%; the same answers
rotated by one sample score under 5%. Rotation skips a neighbour with the same gold (AMC23 has three
such pairs), since handing a sample its own answer is no test of the grader. This checks data, prompts,
extraction and verifiers together."""

from __future__ import annotations

import pytest

from dare.harness import config
from dare.harness.data import load_samples
from dare.harness.verifiers import verifiers

from .helpers import dare_eval, run_record, write_completions

#: the long math sets (hundreds of gold answers through math-verify each) run under -m extended
LONG = {"aime2024", "aime2025", "gsm8k", "math500", "olympiadbench"}
BENCHMARKS = [pytest.param(b, marks=pytest.mark.extended if b in LONG else ())
              for b in ["sudoku", "countdown", "aime2024", "aime2025", "gsm8k", "math500", "olympiadbench", "amc23"]]


def rotated(rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each id with the gold completion of the next sample whose gold differs from its own."""
    out = []
    for i, (sid, own) in enumerate(rows):
        j = next((k % len(rows) for k in range(i + 1, i + len(rows)) if rows[k % len(rows)][1] != own), i)
        out.append((sid, rows[j][1]))
    return out


def gold_rows(benchmark: str) -> list[tuple[str, str]]:
    spec = config.benchmark(benchmark)
    verifier = verifiers.get(spec.verifier)(**spec.verifier_args)
    try:
        return [(s.id, verifier.gold_completion(s)) for s in load_samples(spec.data)]
    finally:
        verifier.close()


def score(tmp_path, benchmark: str, rows: list[tuple[str, str]], name: str) -> dict:
    path = write_completions(tmp_path / f"{name}.jsonl", rows)
    proc = dare_eval("--backend", "replay", "--suite", benchmark, "--completions", str(path),
                     "--out", str(tmp_path / "runs"))
    _, record = run_record(proc)
    return record


def check(tmp_path, benchmark):
    rows = gold_rows(benchmark)
    assert all(c is not None for _, c in rows)
    gold = score(tmp_path, benchmark, rows, "gold")
    metric = gold["metrics"][benchmark]["accuracy"]
    assert metric["value"] == 1.0 and metric["n"] == len(rows)
    assert gold["counts"][benchmark]["error"] == 0
    wrong = score(tmp_path, benchmark, rotated(rows), "rotated")
    assert wrong["metrics"][benchmark]["accuracy"]["value"] < 0.05


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_gold_answers_score_full_and_rotated_score_low(tmp_path, benchmark):
    check(tmp_path, benchmark)
