"""GPU smoke test of the verl bridge: 1 training step of d1 (LLaDA) and DiPO (SDAR) on one GPU.

Uses the settings of configs/experiments/llada_8b_d1_verl.yaml / sdar_8b_dipo_verl.yaml on a moderate
random checkpoint (hidden 512, 4 layers) so it fits any GPU: one DareWorker (FSDP2, nccl) on a local
Ray cluster, which rolls out with the fastdllm engine on its own (unsharded-for-decoding) policy, computes
old / reference log-probs and updates; the driver holds no weights. Skips without CUDA or without the rl
extra (verl, ray).

    pytest tests/gpu/test_verl_cuda.py -m gpu -s
"""

from __future__ import annotations

import json
import time

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
ray = pytest.importorskip("ray")
pytest.importorskip("verl")

from dare.backends.models.tiny import write_tiny_checkpoint  # noqa: E402
from dare.trainers.cli import main  # noqa: E402
from dare.trainers.training.config import load_experiment  # noqa: E402

MODERATE = {
    "llada": {"d_model": 512, "n_heads": 8, "n_kv_heads": 8, "n_layers": 4, "mlp_hidden_size": 1408,
              "vocab_size": 8192, "embedding_size": 8192},
    "sdar": {"hidden_size": 512, "head_dim": 64, "num_attention_heads": 8, "num_key_value_heads": 2,
             "num_hidden_layers": 4, "intermediate_size": 1408, "vocab_size": 8192},
}


@pytest.mark.parametrize("experiment, arch", [("llada_8b_d1_verl", "llada"), ("sdar_8b_dipo_verl", "sdar")])
def test_one_verl_step_on_one_gpu(tmp_path, experiment, arch):
    recipe = load_experiment(experiment, {})
    ckpt = write_tiny_checkpoint(arch, tmp_path / arch, seed=0, config_overrides=MODERATE[arch])
    block = recipe.decoding.get("block_length", 4)
    args = ["--algo", recipe.algorithm, "--model-path", str(ckpt), "--suite", recipe.suite, "--out", str(tmp_path),
            "--steps", "1", "--no-eval", "--engine", "verl", "--nnodes", "1", "--gpus-per-node", "1",
            "--set", "prompts_per_step=2", "--set", "group_size=2", "--set", "micro_batch_size=2",
            "--set", f"dtype={recipe.dtype}", "--set", "decoding.gen_length=32", "--set", "decoding.steps=32",
            "--set", f"decoding.block_length={block}", "--run-name", "smoke"]
    began = time.perf_counter()
    try:
        assert main(args) == 0
    finally:
        ray.shutdown()
    rows = [json.loads(line) for line in (tmp_path / "smoke" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and torch.isfinite(torch.tensor(rows[0]["loss"]))
    phases = rows[0]["time"]  # rollout and old log-probs ran on the worker (the driver has no weights)
    assert {"rollout", "old_logp", "update"} <= set(phases) and rows[0]["nfe"] > 0
    print(f"{experiment}: 1 verl step on 1 GPU in {time.perf_counter() - began:.1f}s, loss {rows[0]['loss']:.4g}, "
          f"phases {phases}")
