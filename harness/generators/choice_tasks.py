"""Multiple-choice versions of the tiny models' own tasks: the right completion among near misses.

Each row of ``sudoku_choice.jsonl`` and ``long_addition_choice.jsonl`` is a test question of the generated
task with four completions in the format the tiny models were trained on: the gold one and three near
misses (Sudoku: one or two of the puzzle's empty cells given another digit; long addition: the sum with one
or two digits changed, in the last work line and the answer block), in a seeded order. Likelihood scoring
then asks whether the model puts more probability on the right completion than on one a cell or a digit
away. The query is the evaluation prompt's text (the DARE templates), so the choice and generated
benchmarks read alike.

    python -m dare.harness.generators.choice_tasks      # rewrites harness/data/{sudoku,long_addition}_choice.jsonl
"""

from __future__ import annotations

import random
from pathlib import Path

from ..data import DATA_DIR, load_samples
from ..prompts import template
from . import write_files
from .long_addition import gold_completion, work_lines

SEED = 20261206
DISTRACTORS = 3


def _order(rng: random.Random, gold: str, wrong: list[str]) -> tuple[list[str], int]:
    choices = [gold, *wrong]
    rng.shuffle(choices)
    return choices, choices.index(gold)


def _near_grid(rng: random.Random, solution: str, empty: list[int]) -> str:
    """The solution with one or two of the puzzle's empty cells given another digit."""
    grid = list(solution)
    for i in rng.sample(empty, min(len(empty), rng.choice((1, 2)))):
        grid[i] = rng.choice([d for d in "1234" if d != solution[i]])
    return "".join(grid)


def _near_sum(rng: random.Random, total: str) -> str:
    """The sum with one or two digits changed (no leading zero)."""
    digits = list(total)
    for i in rng.sample(range(len(digits)), rng.choice((1, 2))):
        digits[i] = rng.choice([d for d in "0123456789" if d != total[i] and (i or d != "0")])
    return "".join(digits)


def _distinct(rng: random.Random, gold: str, change, *args) -> list[str]:
    """``DISTRACTORS`` different near misses of ``gold`` (``change(rng, gold, *args) -> str``)."""
    out: list[str] = []
    while len(out) < DISTRACTORS:
        candidate = change(rng, gold, *args)
        if candidate != gold and candidate not in out:
            out.append(candidate)
    return out


def sudoku_rows(seed: int = SEED) -> list[dict]:
    """Per test puzzle: the solution and three grids with one or two empty cells changed."""
    rng, rows = random.Random(seed), []
    prompt = template("dare_sudoku")
    for sample in load_samples("sudoku_test.jsonl"):
        puzzle, solution = sample.metadata["puzzle"], sample.metadata["solution"]
        empty = [i for i, c in enumerate(puzzle) if c == "0"]
        grids, gold = _order(rng, solution, _distinct(rng, solution, _near_grid, empty))
        rows.append({"id": sample.id.replace("sudoku/", "sudoku_choice/"),
                     "query": prompt.render(sample)[-1].content,
                     "choices": [f"<answer>\n{g}\n</answer>" for g in grids], "gold": gold, "puzzle": puzzle})
    return rows


def _with_sum(a: str, b: str, total: int) -> str:
    """The gold work with ``total`` written in the last line and the answer (a near miss when not a + b)."""
    lines = work_lines(a, b)
    width = len(a) + 1
    lines[-1] = str(total).zfill(width) + lines[-1][width:]
    return "\n".join(lines) + f"\n<answer>\n{total}\n</answer>"


def long_addition_rows(seed: int = SEED) -> list[dict]:
    """Per test addition: the gold work and three with the sum one or two digits off."""
    rng, rows = random.Random(seed), []
    prompt = template("dare_long_addition")
    for sample in load_samples("long_addition_test.jsonl"):
        a, b = sample.metadata["a"], sample.metadata["b"]
        sums = _distinct(rng, str(int(a) + int(b)), _near_sum)
        texts, gold = _order(rng, gold_completion(a, b), [_with_sum(a, b, int(s)) for s in sums])
        rows.append({"id": sample.id.replace("long_addition/", "long_addition_choice/"),
                     "query": prompt.render(sample)[-1].content, "choices": texts, "gold": gold})
    return rows


def write(directory: Path = DATA_DIR, seed: int = SEED) -> list[Path]:
    return write_files({"sudoku_choice.jsonl": sudoku_rows(seed), "long_addition_choice.jsonl":
                        long_addition_rows(seed)}, directory)


if __name__ == "__main__":
    import sys

    from dare.harness.cliutil import emit

    for written in write(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA_DIR):
        emit(written)
