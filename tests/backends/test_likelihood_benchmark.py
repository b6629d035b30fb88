"""benchmarks/likelihood_speed.py at toy sizes: it runs DARE's batched estimator and the loop in the authors'
style, asserts their values agree, and reports how many fewer tokens DARE sent through the network."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "likelihood_speed.py"


@pytest.mark.parametrize("choices, ratio", [(1, 8.0), (2, 16.0)])
def test_the_benchmark_reports_the_rows_one_token_answers_save(choices, ratio):
    """A one-token continuation's Monte-Carlo rows all mask that token: DARE runs one row where the loop runs
    mc_num (8), and two answers after one context share that row (16). The script exits non-zero where the
    values disagree."""
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--requests", "4", "--mc-num", "8",
                           "--batch", "4", "--target-tokens", "1", "1", "--choices", str(choices)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["token_ratio"] == ratio and result["requests"] == 4 and result["max_rel_diff"] <= 1e-5
