"""4x4 Sudoku verifier: exact solve and d1's partial credit.

Rules (tested in tests/harness/test_verifier_sudoku.py):
- The grid is read from the last ``<answer>`` block (a ``\\boxed{}`` inside it wins), else the last box;
  whitespace and separators (``| , - + _ / ; : . [ ] ( ) ' "`` and backticks) are stripped.
- ``passed`` (score 1.0) needs exactly 16 digits forming a valid grid (rows, columns and 2x2 boxes each
  hold 1-4 once) that keeps every clue. This is not always the reference: 124 of the 500 shipped test
  puzzles (d1's file) have two or more solutions, so a valid alternative is a correct solve. With
  ``accept_alternative_solutions=False`` only the reference grid passes. ``details["matches_reference"]``
  says which case applied. (Every train puzzle is unique; both facts are tested.)
- ``details["d1_partial_credit"]`` is d1's metric: the fraction of originally empty cells (puzzle ``0``)
  whose digit equals the reference, after keeping only the digits of the answer and padding with ``0`` or
  truncating to 16 characters (as d1 and DARE's reward do). ``details["partial_credit"]`` is the same
  number, except 1.0 for a passed answer, so partial credit is never below exact accuracy.
- ``details`` also records ``clean`` (the answer held nothing but digits and separators), ``clues_kept``
  and ``valid``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..options import Options
from ..records import Sample, Verdict
from .base import Verifier
from .extract import extract_tagged_answer

SIZE = 4
CELLS = SIZE * SIZE
_SEPARATORS = re.compile(r"[\s|,\-+_/;:.\[\]()'\"`]")
_NON_DIGIT = re.compile(r"\D")


def _units() -> list[list[int]]:
    rows = [[r * SIZE + c for c in range(SIZE)] for r in range(SIZE)]
    cols = [[r * SIZE + c for r in range(SIZE)] for c in range(SIZE)]
    boxes = [[(br + r) * SIZE + bc + c for r in range(2) for c in range(2)] for br in (0, 2) for bc in (0, 2)]
    return rows + cols + boxes


UNITS = _units()
_DIGITS = set("1234")


def is_valid_grid(grid: str) -> bool:
    """16 digits 1-4 with every row, column and 2x2 box holding each digit once."""
    return len(grid) == CELLS and all({grid[i] for i in unit} == _DIGITS for unit in UNITS)


def keeps_clues(grid: str, puzzle: str) -> bool:
    return len(grid) == CELLS and all(p == "0" or p == g for p, g in zip(puzzle, grid))


def partial_credit(digits: str, puzzle: str, solution: str) -> float:
    """d1's score: share of the puzzle's empty cells filled with the solution's digit (0 when none are empty)."""
    grid = (digits + "0" * CELLS)[:CELLS]
    empty = [i for i, p in enumerate(puzzle) if p == "0"]
    if not empty:
        return 0.0
    return sum(grid[i] == solution[i] for i in empty) / len(empty)


def solutions(puzzle: str, limit: int = 2) -> list[str]:
    """Up to ``limit`` completions of ``puzzle`` (backtracking); used to check uniqueness."""
    found: list[str] = []

    def fill(cells: list[str]) -> None:
        if len(found) >= limit:
            return
        try:
            i = cells.index("0")
        except ValueError:
            found.append("".join(cells))
            return
        for digit in "1234":
            if all(cells[j] != digit for unit in UNITS if i in unit for j in unit):
                cells[i] = digit
                fill(cells)
                cells[i] = "0"

    fill(list(puzzle))
    return found


def _puzzle_and_solution(sample: Sample) -> tuple[str, str]:
    solution = str(sample.metadata.get("solution") or sample.reference)
    return str(sample.metadata["puzzle"]), solution


class SudokuOptions(Options):
    accept_alternative_solutions: bool = True


class SudokuVerifier(Verifier):
    """Exact solve plus d1 partial credit. Option: ``accept_alternative_solutions`` (default True)."""

    name = "sudoku"
    version = "1"
    Options = SudokuOptions

    def __init__(self, accept_alternative_solutions: bool = True, **options: Any):
        super().__init__(accept_alternative_solutions=accept_alternative_solutions, **options)
        self.accept_alternatives = bool(accept_alternative_solutions)

    def verify(self, sample: Sample, completion: str) -> Verdict:
        puzzle, solution = _puzzle_and_solution(sample)
        found = extract_tagged_answer(completion)
        if found.answer is None:
            details = {"extraction": "none", "partial_credit": 0.0, "d1_partial_credit": 0.0, "clean": False,
                       "clues_kept": False, "valid": False, "matches_reference": False}
            return Verdict(score=0.0, passed=False, answer=None, details=details)
        stripped = _SEPARATORS.sub("", found.answer)
        digits = _NON_DIGIT.sub("", found.answer)
        valid, clues_kept, matches = is_valid_grid(digits), keeps_clues(digits, puzzle), digits == solution
        passed = matches or (self.accept_alternatives and valid and clues_kept)
        d1_credit = partial_credit(digits, puzzle, solution)
        details: dict[str, Any] = {
            "extraction": found.method,
            "partial_credit": 1.0 if passed else d1_credit,
            "d1_partial_credit": d1_credit,
            "clean": stripped.isdigit() and len(stripped) == CELLS,
            "clues_kept": clues_kept,
            "valid": valid,
            "matches_reference": matches,
        }
        return Verdict(score=float(passed), passed=passed, answer=digits, details=details)

    def verify_batch(self, items: Sequence[tuple[Sample, str]]) -> list[Verdict]:
        # Microseconds per check: a process pool would only add cost.
        return [self.verify(sample, completion) for sample, completion in items]

    def reward(self, verdict: Verdict) -> float:
        # d1's and DARE's Sudoku reward is the share of empty cells filled right; a valid alternative solve
        # counts in full, as in the score.
        return float(verdict.details.get("partial_credit", verdict.score))

    def gold_completion(self, sample: Sample) -> str | None:
        _, solution = _puzzle_and_solution(sample)
        return f"<answer>\n{solution}\n</answer>"

    def describe(self) -> dict[str, Any]:
        return {"exact": "valid grid keeping the clues" if self.accept_alternatives else "equal to the reference",
                "partial_credit": "d1: share of empty cells equal to the reference (1.0 when passed)"}
