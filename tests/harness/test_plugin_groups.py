"""The trainers register in their own entry-point group (``dare.plugins.training``), loaded by the training
registries only: a replay evaluation or a refused command line starts without torch (about 0.6 s instead of 2),
and the training registries still find every built-in on first use. Each check runs in a fresh interpreter,
where nothing was imported before."""

from __future__ import annotations

import subprocess
import sys

from .helpers import write_completions

REPLAY = """
import sys
from dare.harness import cli
code = cli.main(["--backend", "replay", "--suite", "sudoku", "--completions", sys.argv[1], "--out", sys.argv[2],
                 "--no-progress", "--limit", "2"])
print(code, sorted(m for m in ("torch", "dare.trainers.plugin") if m in sys.modules))
"""

TRAINING = """
import sys
from dare.harness.registry import algorithms, engines, losses
engines.names()
before = "dare.trainers.plugin" in sys.modules
print(before, "d1" in algorithms, "token_ppo" in losses.names(), "dare.trainers.plugin" in sys.modules)
"""


def _run(script: str, *args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1].split(" ", 1)


def test_a_replay_evaluation_imports_neither_torch_nor_the_trainers(tmp_path):
    completions = write_completions(tmp_path / "c.jsonl", [("sudoku/test/0", "x"), ("sudoku/test/1", "y")])
    assert _run(REPLAY, str(completions), str(tmp_path / "runs")) == ["0", "[]"]


def test_the_training_registries_load_the_trainers_on_first_use():
    assert _run(TRAINING) == ["False", "True True True"]
