"""``dare-eval --model-path DIR --suite sudoku --limit 4 --backend torch`` on a tiny checkpoint of each
architecture, through the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dare.backends.models.tiny import ARCHITECTURES

DARE_EVAL = shutil.which("dare-eval") or shutil.which("dare-eval", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(DARE_EVAL is None, reason="dare-eval console script is not installed")
# block diffusion runs by default, masked diffusion with -m extended, the rest with -m slow
@pytest.mark.parametrize("arch", [a if a == "sdar" else pytest.param(a, marks=pytest.mark.extended if a == "llada"
                                                                      else pytest.mark.slow)
                                  for a in ARCHITECTURES])
def test_dare_eval_runs_sudoku_on_tiny_checkpoint(tiny_dirs, tmp_path, arch):
    cmd = [DARE_EVAL, "--model-path", str(tiny_dirs[arch]), "--suite", "sudoku", "--limit", "4", "--backend", "torch",
           "--out", str(tmp_path / "runs"), "--no-progress", "--device", "cpu",
           # small canvas: the tiny model's answers are noise anyway; this checks the plumbing end to end
           "--set", "gen_length=16", "--set", "steps=16", "--set", "block_length=8"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = list((tmp_path / "runs").glob("*/run.json"))
    assert len(runs) == 1
    record = json.loads(runs[0].read_text())
    assert record["status"] == "complete" and record["model"]["architecture"] == arch
    assert record["backend"]["name"] == "torch"
    samples = [json.loads(line) for line in (runs[0].parent / "samples.jsonl").read_text().splitlines() if line]
    assert len(samples) == 4
