"""Shipped data files the project builds itself (``harness/data/``), one module per file family.

Synthetic tasks (``long_addition``, with a seed; ``choice_tasks``, their multiple-choice versions), the EvalPlus
sets converted from their release files (``evalplus``: HumanEval+ v0.1.10, and MBPP+ v0.2.0 derived from v0.1.0
by ``mbppplus_v020``) and the likelihood benchmarks from their public copies (``choice_sources``). Each module
rebuilds its shipped files byte for byte (``python -m dare.harness.generators.<module>``); the files'
sha256 sit in ``harness/data/MANIFEST.sha256`` like every other shipped split.
"""

from __future__ import annotations

import json
from pathlib import Path


def file_text(rows: list[dict]) -> str:
    """JSONL as every generated file is written (``", "`` and ``": "`` separators, ASCII escapes)."""
    return "".join(json.dumps(row, separators=(", ", ": ")) + "\n" for row in rows)


def write_files(files: dict[str, list[dict]], directory: Path) -> list[Path]:
    """Write each ``name -> rows`` under ``directory``; returns the paths in order."""
    paths = []
    for name, rows in files.items():
        path = Path(directory) / name
        path.write_text(file_text(rows), encoding="utf-8")
        paths.append(path)
    return paths
