"""Long addition written column by column: a long-canvas task whose every step is checkable on its own.

A row asks for ``a + b`` (two ``DIGITS``-digit numbers). The written work (the gold completion) is a column
of fixed-width lines ``x+y``, where ``x`` and ``y`` start as ``a`` and ``b`` zero-padded to ``DIGITS + 1``
digits and each following line processes one column, right to left::

    0482137+0396715      the operands, padded
    0482132+039671*      column 6: 7+5+0 = 12 -> x digit 2, y digit '*' (carry 1)
    0482152+03967.*      column 5: 3+1+1 = 5  -> x digit 5, y digit '.' (carry 0)
    ...
    0878852+.......      after the leading column, x is the sum
    <answer>
    878852
    </answer>

Why this layout: every character of a line is either a copy of the character one line up (a constant
offset of ``WIDTH`` tokens under a one-character-per-token tokenizer) or a function of the three characters
at the active column and its right neighbour one line up (x digit, y digit, carry mark); the active column
is the rightmost y digit not yet turned into a mark. So the canvas is long (``DIGITS + 2`` lines of ``WIDTH``
characters, 128 for 6 digits) while each decision is local and regular, which a tiny masked-diffusion
model can learn; the carry chain still makes the answer depend on every earlier step.

    python -m dare.harness.generators.long_addition      # rewrites harness/data/long_addition_{train,test}.jsonl
"""

from __future__ import annotations

import random
from pathlib import Path

from . import file_text, write_files  # noqa: F401  (file_text: the tests rebuild the files with it)

DIGITS = 6
WIDTH = 2 * (DIGITS + 1) + 2  # x, '+', y, newline
SEED = 20261201
TEST_ROWS = 500
TRAIN_ROWS = 8000
NO_CARRY, CARRY = ".", "*"
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def next_line(line: str, column: int) -> str:
    """The work line after processing ``column`` (0 = leftmost) of ``line`` ("x+y", no newline)."""
    x, y = line.split("+")
    carry_in = column + 1 < len(y) and y[column + 1] == CARRY
    total = int(x[column]) + int(y[column]) + int(carry_in)
    x = x[:column] + str(total % 10) + x[column + 1:]
    y = y[:column] + (CARRY if total >= 10 else NO_CARRY) + y[column + 1:]
    return f"{x}+{y}"


def work_lines(a: str, b: str) -> list[str]:
    """The ``len(a) + 2`` lines of written work for ``a + b`` (equal-length digit strings)."""
    width = len(a) + 1
    lines = [f"{a.zfill(width)}+{b.zfill(width)}"]
    for column in reversed(range(width)):
        lines.append(next_line(lines[-1], column))
    return lines


def gold_completion(a: str, b: str) -> str:
    """Work lines, then the sum (no leading zeros) in an ``<answer>`` block."""
    return "\n".join(work_lines(a, b)) + f"\n<answer>\n{int(a) + int(b)}\n</answer>"


def question(a: str, b: str) -> str:
    return f"Add {a} and {b}."


def make_rows(seed: int = SEED, test_rows: int = TEST_ROWS, train_rows: int = TRAIN_ROWS,
              digits: int = DIGITS) -> dict[str, list[dict]]:
    """Test and train rows, deterministic from ``seed``; no (a, b) pair appears twice in or across splits."""
    rng = random.Random(seed)
    low, high = 10 ** (digits - 1), 10 ** digits - 1
    seen: set[tuple[int, int]] = set()
    out: dict[str, list[dict]] = {}
    for split, count in (("test", test_rows), ("train", train_rows)):
        rows = []
        while len(rows) < count:
            pair = (rng.randint(low, high), rng.randint(low, high))
            if pair in seen:
                continue
            seen.add(pair)
            a, b = map(str, pair)
            rows.append({"id": f"long_addition/{split}/{len(rows)}", "prompt": question(a, b),
                         "answer": str(pair[0] + pair[1]), "a": a, "b": b})
        out[split] = rows
    return out


def write(directory: Path = DATA_DIR, seed: int = SEED) -> list[Path]:
    """Write ``long_addition_{test,train}.jsonl`` into ``directory``; returns the paths."""
    return write_files({f"long_addition_{split}.jsonl": rows for split, rows in make_rows(seed).items()}, directory)


if __name__ == "__main__":
    import sys

    from dare.harness.cliutil import emit

    for written in write(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA_DIR):
        emit(written)
