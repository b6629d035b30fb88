"""Training-step cost of every RL algorithm on 8B-shaped dLLMs on one GPU: one step of the local trainer
(rollout, the algorithm's own additions, old / reference log-probs, its inner updates) per algorithm, on
LLaDA-8B's shape for the masked-diffusion ones and SDAR-8B's for the block-diffusion ones.

    python benchmarks/gpu_train.py [--shape 8b|small|tiny] [--algorithms d1,wd1,...] [--prompts 2] [--group 4]
        [--gen 64] [--lora-rank 128] [--device cuda]

Weights are random (bf16 on CUDA) made on the device from the real config.json shapes (nothing written but
config and a byte-level tokenizer), so only time and memory mean anything; Sudoku prompts, ``--gen`` tokens
decoded in ``--gen`` steps (blocks of 32 for SDAR, or ``--gen`` when shorter). LoRA rank 128 on every linear
layer by default (d-TreeRPO's recipe; the reference policy is the base with the adapters off, so no second 8B
copy); ``--lora-rank 0`` trains every weight. ``--shape small`` (hidden 512, 4 layers, the real vocabulary)
and ``--shape tiny`` (the tiny random models' own configs) run anywhere, the CPU included. The last line is
one JSON object: per algorithm, the model, seconds per phase of its step, the step's seconds and peak memory (MiB).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_decode import LLADA_8B, SDAR_8B, SMALL  # noqa: E402  (the decode benchmark's shapes)

from dare.backends.models import loader  # noqa: E402
from dare.backends.models.tiny import write_tiny_checkpoint  # noqa: E402
from dare.harness.registry import algorithms  # noqa: E402
from dare.trainers import plugin  # noqa: E402,F401  (registers the built-in algorithms)
from dare.trainers.training.config import TrainConfig  # noqa: E402
from dare.trainers.training.trainer import LocalTrainer  # noqa: E402

SHAPE_KEYS = {"llada": ("d_model", "n_heads", "n_kv_heads", "n_layers", "mlp_hidden_size", "vocab_size",
                        "embedding_size", "rope_theta"),
              "sdar": ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers",
                       "intermediate_size", "vocab_size", "rope_theta")}
FAMILY_ARCH = {"bidirectional": "llada", "block_causal": "sdar"}
#: settings that keep one step within a benchmark's budget (the same cuts as the CPU comparisons)
LIGHTER = {"bgpo": {"estimator_args": {"samples": 4}}, "ebpo": {"estimator_args": {"samples": 4}},
           "unigrpo": {"estimator_args": {"samples": 4}}, "d_treerpo": {"trees": 2, "branch": 2}}


def random_state(net: torch.nn.Module, arch, path: Path, dtype: torch.dtype, device="cpu") -> None:
    """Stands in for the checkpoint reader: N(0, 0.02) weights and unit norms made on ``device``."""
    net.to_empty(device=device)
    net.to(dtype)
    with torch.no_grad():
        for name, p in net.named_parameters():
            p.fill_(1.0) if name.endswith("norm.weight") else p.normal_(0.0, 0.02)


def checkpoint(arch: str, shape: str, root: Path) -> Path:
    """A config (the real shape, the byte-level tokenizer's special ids) and tokenizer, no weights; ``tiny``
    keeps the tiny random model's own config (a CPU smoke run)."""
    directory = write_tiny_checkpoint(arch, root / arch)
    for weights in directory.glob("*.safetensors*"):
        weights.unlink()  # random_state makes the weights: the config is what matters
    if shape != "tiny":
        base = LLADA_8B if arch == "llada" else SDAR_8B
        overrides = {**{k: base[k] for k in SHAPE_KEYS[arch] if k in base}, **(SMALL[arch] if shape == "small" else {})}
        config = json.loads((directory / "config.json").read_text())
        (directory / "config.json").write_text(json.dumps({**config, **overrides}, indent=2))
    return directory


def rl_algorithms() -> list[str]:
    return [n for n in algorithms.names() if algorithms.get(n).needs.rollout and algorithms.get(n).needs.rewards]


def one_step(algorithm: str, path: Path, args, run_dir: Path) -> dict:
    cls = algorithms.get(algorithm)
    arch = FAMILY_ARCH.get(cls.needs.attention or "bidirectional")
    block = min(32, args.gen) if arch == "sdar" else args.gen
    config = TrainConfig(algorithm=algorithm, algorithm_settings=LIGHTER.get(algorithm, {}), suite="sudoku",
                         model_path=str(path / arch), steps=1, prompts_per_step=args.prompts,
                         group_size=args.group, micro_batch_size=args.prompts * args.group, lr=1e-5,
                         lora_rank=args.lora_rank, dtype="bfloat16" if args.device.startswith("cuda") else "float32",
                         device=args.device, evaluate=False,
                         decoding={"gen_length": args.gen, "steps": args.gen, "block_length": block})
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    trainer = LocalTrainer(config, run_dir / algorithm)
    began = time.perf_counter()
    row = trainer.step(0)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    trainer.verifiers.close()
    peak = torch.cuda.max_memory_allocated() / 2**20 if args.device.startswith("cuda") else None
    out = {"model": arch, "step_s": round(seconds, 3), "phases_s": row["time"], "peak_mib": peak,
           "loss_finite": bool(torch.isfinite(torch.tensor(row["loss"])))}
    del trainer
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=["8b", "small", "tiny"], default="8b")
    ap.add_argument("--algorithms", help="comma-separated (default: every registered RL algorithm)")
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--lora-rank", type=int, default=128)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    names = args.algorithms.split(",") if args.algorithms else rl_algorithms()
    results: dict = {"device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
                     "shape": args.shape, "lora_rank": args.lora_rank, "rows": args.prompts * args.group,
                     "gen": args.gen, "algorithms": {}}
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(loader, "load_state", random_state):
        root = Path(tmp)
        for arch in ("llada", "sdar"):
            checkpoint(arch, args.shape, root)
        for name in names:
            try:
                results["algorithms"][name] = one_step(name, root, args, root / "runs")
            except Exception as exc:  # one algorithm's failure (e.g. out of memory) must not hide the others
                results["algorithms"][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            print(name, results["algorithms"][name], flush=True)
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
