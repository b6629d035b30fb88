"""Sudoku verifier: exact solve, d1 partial credit, clue handling, and the shipped puzzles."""

from __future__ import annotations

import json

import pytest

from dare.harness.data import load_samples
from dare.harness.records import Sample
from dare.harness.verifiers import verifiers
from dare.harness.verifiers.sudoku import SudokuVerifier, is_valid_grid, keeps_clues, partial_credit, solutions

PUZZLE, SOLUTION = "3102200002100320", "3142243142131324"  # sudoku/test/0: empty cells 2, 5, 6, 7, 8, 11, 12, 15


@pytest.fixture(scope="module")
def verifier():
    return SudokuVerifier()


def sample() -> Sample:
    return Sample(id="s", prompt="p", reference=SOLUTION, metadata={"puzzle": PUZZLE, "solution": SOLUTION})


def with_cells(grid: str, changes: dict[int, str]) -> str:
    cells = list(grid)
    for i, d in changes.items():
        cells[i] = d
    return "".join(cells)


@pytest.mark.parametrize(
    "completion",
    [
        f"<answer>\n{SOLUTION}\n</answer>",
        "<reasoning>...</reasoning><answer>3142 2431 4213 1324</answer>",
        "<answer>\n3 1 4 2\n2 4 3 1\n4 2 1 3\n1 3 2 4\n</answer>",
        "<answer>3142|2431|4213|1324</answer>",
        f"<answer>0000000000000000</answer> then <answer>{SOLUTION}</answer>",
        rf"<answer>\boxed{{{SOLUTION}}}</answer>",
    ],
)
def test_exact_solutions(verifier, completion):
    verdict = verifier.verify(sample(), completion)
    assert verdict.passed and verdict.score == 1.0 and verdict.details["partial_credit"] == 1.0
    assert verdict.answer == SOLUTION and verdict.details["valid"] and verdict.details["clues_kept"]
    assert verdict.details["matches_reference"] and verdict.details["d1_partial_credit"] == 1.0


def test_partial_credit_counts_only_empty_cells(verifier):
    two_wrong = with_cells(SOLUTION, {2: "1", 5: "1"})  # two of the eight empty cells wrong
    verdict = verifier.verify(sample(), f"<answer>{two_wrong}</answer>")
    assert not verdict.passed and verdict.score == 0.0
    assert verdict.details["partial_credit"] == pytest.approx(6 / 8)
    assert not verdict.details["valid"]


def test_changed_clue_fails_exact_but_not_empty_cell_credit(verifier):
    clue_changed = with_cells(SOLUTION, {0: "4"})  # cell 0 is a given
    verdict = verifier.verify(sample(), f"<answer>{clue_changed}</answer>")
    assert not verdict.passed and not verdict.details["clues_kept"]
    assert verdict.details["partial_credit"] == 1.0  # d1's metric looks at empty cells only


def test_short_long_and_missing_answers(verifier):
    short = verifier.verify(sample(), f"<answer>{SOLUTION[:8]}</answer>")  # padded with 0: cells 2, 5, 6, 7 right
    assert not short.passed and short.details["partial_credit"] == pytest.approx(4 / 8)
    long = verifier.verify(sample(), f"<answer>{SOLUTION}1</answer>")  # truncated for credit, not exact
    assert not long.passed and long.details["partial_credit"] == 1.0
    none = verifier.verify(sample(), SOLUTION)  # no tags: no answer
    assert none.answer is None and none.details["partial_credit"] == 0.0 and none.status == "scored"
    empty = verifier.verify(sample(), "<answer></answer>")
    assert not empty.passed and empty.details["partial_credit"] == 0.0


def test_clean_flag(verifier):
    assert verifier.verify(sample(), f"<answer>{SOLUTION}</answer>").details["clean"]
    noisy = verifier.verify(sample(), f"<answer>grid: {SOLUTION}</answer>")
    assert noisy.passed and not noisy.details["clean"]  # digits are kept as d1 does; the noise is recorded


def test_helpers():
    assert is_valid_grid(SOLUTION) and not is_valid_grid(PUZZLE)
    assert partial_credit(SOLUTION, "1234341221434321", "1234341221434321") == 0.0  # no empty cell
    assert solutions(PUZZLE) == [SOLUTION]
    assert len(solutions("0" * 16, limit=5)) == 5


def test_registry_and_gold(verifier):
    assert verifiers.get("sudoku") is SudokuVerifier
    verdict = verifier.verify(sample(), verifier.gold_completion(sample()))
    assert verdict.passed
    json.dumps(verdict.model_dump())  # details must be plain JSON for samples.jsonl


def test_valid_alternative_solution_passes_unless_reference_required():
    puzzle = "0000000000001234"  # many completions
    reference, alternative = solutions(puzzle, limit=2)
    s = Sample(id="m", prompt="p", reference=reference, metadata={"puzzle": puzzle, "solution": reference})
    lenient, strict = SudokuVerifier(), SudokuVerifier(accept_alternative_solutions=False)
    verdict = lenient.verify(s, f"<answer>{alternative}</answer>")
    assert verdict.passed and verdict.details["partial_credit"] == 1.0 and not verdict.details["matches_reference"]
    assert verdict.details["d1_partial_credit"] < 1.0
    verdict = strict.verify(s, f"<answer>{alternative}</answer>")
    assert not verdict.passed and verdict.details["partial_credit"] == verdict.details["d1_partial_credit"] < 1.0
    assert strict.verify(s, f"<answer>{reference}</answer>").passed


def _check_shipped(verifier, data_file):
    samples = load_samples(data_file)
    ambiguous = 0
    for s in samples:
        puzzle, solution = s.metadata["puzzle"], s.metadata["solution"]
        assert is_valid_grid(solution) and keeps_clues(solution, puzzle), s.id
        ambiguous += len(solutions(puzzle, limit=2)) > 1
    golds = [verifier.gold_completion(s) for s in samples]
    verdicts = verifier.verify_batch(list(zip(samples, golds)))
    assert all(v.passed and v.details["matches_reference"] for v in verdicts)
    rotated = verifier.verify_batch([(s, golds[(i + 1) % len(samples)]) for i, s in enumerate(samples)])
    assert sum(v.passed for v in rotated) / len(samples) < 0.05
    return ambiguous


def test_test_puzzles_self_verify_and_some_have_several_solutions(verifier):
    assert _check_shipped(verifier, "sudoku_test.jsonl") == 124  # d1's test file: 124 of 500 are ambiguous


@pytest.mark.slow
def test_train_puzzles_are_unique_and_self_verify(verifier):
    assert _check_shipped(verifier, "sudoku_train.jsonl") == 0


def test_rl_reward_is_d1_partial_credit(verifier):
    """Training rewards follow d1's / DARE's rule (share of empty cells right) while the score stays exact."""
    two_wrong = verifier.verify(sample(), f"<answer>{with_cells(SOLUTION, {2: '1', 5: '1'})}</answer>")
    assert two_wrong.score == 0.0 and verifier.reward(two_wrong) == pytest.approx(6 / 8)
    assert verifier.reward(verifier.verify(sample(), f"<answer>{SOLUTION}</answer>")) == 1.0
    assert verifier.reward(verifier.verify(sample(), "no answer")) == 0.0
