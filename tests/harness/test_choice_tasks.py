"""The tiny models' choice tasks: rebuilt byte for byte from the generator, near misses one or two away."""

from __future__ import annotations

import re

from dare.harness.data import file_sha256, load_rows, manifest
from dare.harness.generators import choice_tasks


def test_generator_rebuilds_the_shipped_files(tmp_path):
    for path in choice_tasks.write(tmp_path):
        assert file_sha256(path) == manifest()[path.name], path.name


def _differences(a: str, b: str) -> int:
    return sum(x != y for x, y in zip(a, b))


def test_sudoku_choices_are_the_solution_and_grids_one_or_two_empty_cells_off():
    solutions = {r["id"].split("/")[-1]: r["solution"] for r in load_rows("sudoku_test.jsonl")}
    rows = load_rows("sudoku_choice.jsonl")
    assert len(rows) == 500
    for row in rows:
        grids = [re.search(r"<answer>\n(\d{16})\n</answer>", c).group(1) for c in row["choices"]]
        assert grids[row["gold"]] == solutions[row["id"].split("/")[-1]] and len(set(grids)) == 4
        for i, grid in enumerate(grids):
            if i != row["gold"]:
                changed = [j for j in range(16) if grid[j] != grids[row["gold"]][j]]
                assert 1 <= len(changed) <= 2 and all(row["puzzle"][j] == "0" for j in changed)


def test_long_addition_choices_are_the_sum_and_sums_one_or_two_digits_off():
    rows = load_rows("long_addition_choice.jsonl")
    assert len(rows) == 500
    for row in rows:
        a, b = re.match(r"Add (\d+) and (\d+)\.", row["query"]).groups()
        sums = [re.search(r"<answer>\n(\d+)\n</answer>", c).group(1) for c in row["choices"]]
        assert sums[row["gold"]] == str(int(a) + int(b)) and len(set(sums)) == 4
        assert all(1 <= _differences(s, sums[row["gold"]]) <= 2 for i, s in enumerate(sums) if i != row["gold"])
