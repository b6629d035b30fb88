"""Run a script of benchmarks/ as ``__main__`` in the test's process, as a user runs it."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def run_benchmark(name: str, *args: str) -> int:
    """``python benchmarks/NAME ARGS``: its exit code (its output goes to the captured stdout)."""
    argv = sys.argv
    sys.argv = [name, *args]
    try:
        with pytest.raises(SystemExit) as done:
            runpy.run_path(str(BENCHMARKS / name), run_name="__main__")
    finally:
        sys.argv = argv
    return done.value.code
