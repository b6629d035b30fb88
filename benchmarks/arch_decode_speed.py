"""Decoding speed of the torch engine on each architecture's tiny random model (CPU by default).

    python benchmarks/arch_decode_speed.py [--gen-length 64] [--batch 4] [--threads 1] [--device cpu]

For every architecture: write a tiny checkpoint, decode ``--batch`` prompts with the architecture's usual
strategy (LLaDA low-confidence, Dream entropy, SDAR dynamic threshold, LLaDA2 threshold, plus LLaDA2.1
editing), and report generated tokens per second and forward passes (NFE) per generated token. Tiny
random models say nothing about quality; the ratios show decoder overheads (e.g. the block cache makes
SDAR's NFE per token ~1 while each forward only sees one block). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from dare.backends.engines.torch import TorchEngine
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.harness.engine import EngineContext, GenerationRequest
from dare.harness.records import DecodingConfig, Message

CASES = {
    "llada": ("llada", {"block_length": 32, "remasking": "low_confidence"}),
    "llada_threshold": ("llada", {"block_length": 32, "remasking": "low_confidence", "threshold": 0.9}),
    "dream": ("dream", {"remasking": "entropy"}),
    "sdar": ("sdar", {"block_length": 4, "remasking": "low_confidence_dynamic", "threshold": 0.9}),
    "sdar_moe": ("sdar_moe", {"block_length": 4, "remasking": "low_confidence_static"}),
    "llada2_moe": ("llada2_moe", {"block_length": 32, "remasking": "low_confidence", "threshold": 0.95}),
    "llada2.1_editing": ("llada2_moe", {"block_length": 32, "remasking": "editing", "threshold": 0.7,
                                        "extra": {"editing_threshold": 0.5, "max_post_steps": 4}}),
}


def bench(engine: TorchEngine, settings: dict, gen_length: int, batch: int) -> dict:
    settings = {"block_length": gen_length, **settings}
    cfg = DecodingConfig(gen_length=gen_length, steps=gen_length, batch_size=batch, **settings)
    requests = [GenerationRequest(sample_id=f"q{i}", index=0, seed=i,
                                  messages=(Message(role="user", content=f"Question {i}: what is {i} + {i}?"),))
                for i in range(batch)]
    engine.generate(requests[:1], cfg.model_copy(update={"gen_length": cfg.block_length, "steps": cfg.block_length}))
    start = time.perf_counter()
    outputs = engine.generate(requests, cfg)
    seconds = time.perf_counter() - start
    tokens = sum(len(g.token_ids or []) for g in outputs)
    nfe = sum(g.nfe or 0 for g in outputs)
    return {"tokens_per_s": round(tokens / seconds, 1), "nfe_per_token": round(nfe / tokens, 3),
            "seconds": round(seconds, 3), "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gen-length", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (tiny models: 1 is fastest)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        engines: dict[str, TorchEngine] = {}
        for case, (arch, settings) in CASES.items():
            if arch not in engines:
                path = write_tiny_checkpoint(arch, Path(tmp) / arch)
                ctx = EngineContext(model_name=f"tiny-{arch}", model_path=path, device=args.device)
                engines[arch] = TorchEngine(ctx)
            results[case] = bench(engines[arch], settings, args.gen_length, args.batch)
            row = results[case]
            print(f"{case:18s} {row['tokens_per_s']:8.1f} tok/s  {row['nfe_per_token']:.3f} NFE/token")
    print(json.dumps({"device": args.device, "gen_length": args.gen_length, "batch": args.batch,
                      "threads": args.threads, "results": results}))


if __name__ == "__main__":
    main()
