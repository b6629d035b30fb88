"""GPU checks of the local trainer: one step of d1 (LLaDA) and block SFT / DiPO (SDAR) on one GPU, one step of
every RL algorithm on the 8B shapes (benchmarks/gpu_train.py), and FlexAttention block masks in training
agreeing with the dense SDPA mask.

Moderate random checkpoints (hidden 512, 4 layers) so they fit any GPU.

    pytest tests/gpu/test_train_cuda.py -m gpu -s
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from dare.backends.models.tiny import write_tiny_checkpoint
from dare.trainers.cli import main

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

MODERATE = {
    "llada": {"d_model": 512, "n_heads": 8, "n_kv_heads": 8, "n_layers": 4, "mlp_hidden_size": 1408},
    "sdar": {"hidden_size": 512, "head_dim": 64, "num_attention_heads": 8, "num_key_value_heads": 2,
             "num_hidden_layers": 4, "intermediate_size": 1408},
}


def _train(tmp_path, arch: str, algo: str, name: str, *settings: str) -> dict:
    ckpt = tmp_path / arch
    if not ckpt.exists():
        write_tiny_checkpoint(arch, ckpt, seed=0, config_overrides=MODERATE[arch])
    args = ["--algo", algo, "--model-path", str(ckpt), "--suite", "sudoku", "--out", str(tmp_path), "--steps", "1",
            "--no-eval", "--run-name", name, "--set", "prompts_per_step=2", "--set", "group_size=2",
            "--set", "decoding.gen_length=32", "--set", "decoding.steps=32", "--set", "decoding.block_length=4"]
    for setting in settings:
        args += ["--set", setting]
    assert main(args) == 0
    rows = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and torch.isfinite(torch.tensor(rows[0]["loss"]))
    return rows[0]


def test_d1_and_dipo_one_step_bf16(tmp_path):
    d1 = _train(tmp_path, "llada", "d1_dare", "d1", "dtype=bfloat16")
    dipo = _train(tmp_path, "sdar", "dipo", "dipo", "dtype=bfloat16")
    print(f"d1 bf16 step {d1['time']}; dipo bf16 step {dipo['time']}")


def test_flex_block_mask_training_matches_sdpa(tmp_path):
    """Block-diffusion SFT: the same step with FlexAttention (auto on CUDA) and dense SDPA masks."""
    flex = _train(tmp_path, "sdar", "sft", "flex", "attention=auto", "micro_batch_size=2")
    dense = _train(tmp_path, "sdar", "sft", "dense", "attention=sdpa", "micro_batch_size=2")
    assert flex["loss"] == pytest.approx(dense["loss"], rel=1e-3)
    assert flex["grad_norm"] == pytest.approx(dense["grad_norm"], rel=1e-2)
    print(f"block SFT loss flex {flex['loss']:.6f} vs sdpa {dense['loss']:.6f}; "
          f"update s flex {flex['time'].get('update')} vs sdpa {dense['time'].get('update')}")


def test_every_rl_algorithm_takes_one_step_on_the_8b_shapes():
    """LLaDA-8B's shape for the masked-diffusion algorithms, SDAR-8B's for the block ones, LoRA r128, bf16:
    every step finishes with a finite loss (times and peak memory are printed, never asserted)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from gpu_train import main as benchmark

    results = benchmark(["--shape", "8b", "--prompts", "2", "--group", "4", "--gen", "64"])["algorithms"]
    failed = {name: r["error"] for name, r in results.items() if "error" in r}
    assert not failed, failed
    assert all(r["loss_finite"] for r in results.values())
