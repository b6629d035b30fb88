"""A local lm-eval ``multiple_choice`` task over DARE's own ``sudoku_choice`` data (each puzzle's solution among
three near misses): lm-eval builds the same contexts and continuations from the same rows as dare-eval's
``--suite sudoku_choice`` does (the query, a space, the choice). Nothing is fetched."""

from __future__ import annotations

from pathlib import Path

from dare.harness import config as cfg
from dare.harness.data import verified_path

TASK = "dare_sudoku_choice"


def write_task(folder: Path) -> Path:
    data, _ = verified_path(cfg.benchmark("sudoku_choice").data)
    lines = [f"task: {TASK}", "dataset_path: json", "dataset_kwargs:", "  data_files:", f"    test: {data}",
             "test_split: test", "output_type: multiple_choice", "doc_to_text: '{{query}}'",
             "doc_to_choice: '{{choices}}'", "doc_to_target: '{{gold}}'", "metric_list:", "  - metric: acc",
             "  - metric: acc_norm", "metadata:", "  version: 1.0"]
    path = folder / f"{TASK}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
