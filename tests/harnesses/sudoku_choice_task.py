"""A local lm-eval ``multiple_choice`` task over DARE's shipped Sudoku test split: the solution against the puzzle
itself (its zeros unfilled), scored by ``loglikelihood``. Nothing is fetched."""

from __future__ import annotations

from pathlib import Path

from dare.harness import config as cfg
from dare.harness.data import verified_path

TASK = "dare_sudoku_choice"


def write_task(folder: Path) -> Path:
    data, _ = verified_path(cfg.benchmark("sudoku").data)
    lines = [f"task: {TASK}", "dataset_path: json", "dataset_kwargs:", "  data_files:", f"    test: {data}",
             "test_split: test", "output_type: multiple_choice", "doc_to_text: 'Sudoku {{puzzle}} solved:'",
             "doc_to_choice: '{{[solution, puzzle]}}'", "doc_to_target: 0", "metric_list:", "  - metric: acc",
             "metadata:", "  version: 1.0"]
    path = folder / f"{TASK}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
