"""GPU check of batched likelihood scoring: benchmarks/likelihood_speed.py on the real LLaDA-8B shape.

Random bf16 weights built on the GPU (benchmarks/gpu_decode.py's ``build``), 16 requests, mc_num 128, batch 8
(and MMLU's shape: 64 one-token answers, four per context, mc_num 1): DARE's batched ``llada_mc`` against the
one-request-at-a-time loop in the authors' style. The benchmark asserts the values agree (bf16: 2e-2 relative)
and prints the speed ratio as JSON. Skips without CUDA.

    pytest tests/gpu/test_likelihood_cuda.py -m gpu -s
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "likelihood_speed.py"


SETTINGS = {"cfg0": ["--requests", "16", "--cfg", "0.0"], "cfg0.5": ["--requests", "16", "--cfg", "0.5"],
            # LLaDA's MMLU recipe: one sample of a one-token answer, four answers after each context
            "mmlu": ["--requests", "64", "--choices", "4", "--target-tokens", "1", "1",
                     "--mc-num", "1", "--batch", "1"]}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_batched_llada_likelihood_on_the_8b_shape(setting):
    args = SETTINGS[setting]
    done = subprocess.run([sys.executable, str(SCRIPT), "--shape", "8b", "--device", "cuda", *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(result))
    assert result["device"].startswith("cuda") and result["requests"] == int(args[1])
