"""Fast-dLLM caches vs the reference torch engine: tokens/s ratios and accuracy on a planning benchmark.

    python benchmarks/decode_speed.py [--model tiny-llada] [--benchmark sudoku] [--samples 64]
        [--gen-length 256] [--block-length 32] [--batch 16] [--threshold 0.9] [--reference-samples N]

Prompts come from the benchmark's own prompt template and are scored by its verifier (dare.harness), so
the accuracies are real (the shipped tiny-llada is trained on Sudoku with 32-token answers; ``partial_credit``
is the benchmark's partial-credit metric). Modes: ``reference`` (torch engine, one token per step, steps =
gen_length), ``prefix`` / ``dual`` (Fast-dLLM caches, same steps), ``dual_threshold`` (dual cache + threshold
commits). Every mode decodes the same prompts unless ``--reference-samples`` limits the slow reference to the
first N (tokens/s is a rate; its accuracy is then over that subset, reported with its n).
The last line is one JSON object with ``speedup`` (mode -> tokens/s over the reference), ``accuracy``
with its bootstrap 95% interval (``accuracy_ci``), ``accuracy_delta`` (each mode minus the reference,
paired over the prompts both decoded, with its paired bootstrap interval) and ``partial_credit``.

The long-canvas measurement (154-token answers, 5 blocks of 32)::

    python benchmarks/decode_speed.py --model tiny-llada-long --benchmark long_addition --samples 128 \
        --gen-length 160 --block-length 32
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from dare.backends.engines.fastdllm import FastDllmEngine
from dare.backends.engines.torch import TorchEngine
from dare.harness import config, prompts
from dare.harness import verifiers as _verifiers  # noqa: F401  (registers the verifiers)
from dare.harness.data import load_samples
from dare.harness.engine import EngineContext, GenerationRequest, request_seed
from dare.harness.metrics import bootstrap_ci, partial_credit
from dare.harness.records import DecodingConfig
from dare.harness.registry import verifiers


def _requests(bench, samples):
    template = prompts.template(bench.prompt)
    return [GenerationRequest(sample_id=s.id, index=0, messages=template.render(s), seed=request_seed(0, s.id, 0))
            for s in samples]


def _run(engine, requests, samples, cfg, verifier) -> dict:
    engine.generate(requests[:1], cfg.model_copy(update={"gen_length": cfg.block_length,
                                                         "steps": cfg.steps * cfg.block_length // cfg.gen_length}))
    start = time.perf_counter()
    outputs = engine.generate(requests, cfg)
    seconds = time.perf_counter() - start
    tokens = sum(len(g.token_ids or []) for g in outputs)
    nfe = sum(g.nfe or 0 for g in outputs)
    verdicts = verifier.verify_batch([(s, g.text) for s, g in zip(samples, outputs)])
    passed = [float(v.passed) for v in verdicts]
    return {"tokens_per_s": round(tokens / seconds, 2), "seconds": round(seconds, 2), "samples": len(outputs),
            "nfe_per_token": round(nfe / tokens, 4), "accuracy": sum(passed) / len(passed),
            "accuracy_ci": [round(x, 4) for x in bootstrap_ci(passed)], "passed": passed,
            "partial_credit": round(partial_credit(verdicts), 4)}


def _paired(mode: dict, reference: dict) -> dict:
    """Accuracy of ``mode`` minus the reference's over the prompts both decoded (the reference's first n)."""
    diffs = [a - b for a, b in zip(mode["passed"], reference["passed"])]
    return {"value": round(sum(diffs) / len(diffs), 4), "ci": [round(x, 4) for x in bootstrap_ci(diffs)],
            "n": len(diffs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-llada")
    parser.add_argument("--benchmark", default="sudoku")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--reference-samples", type=int, default=None,
                        help="decode only the first N prompts with the slow reference (default: all)")
    parser.add_argument("--gen-length", type=int, default=256)
    parser.add_argument("--block-length", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bench = config.benchmark(args.benchmark)
    samples = load_samples(bench.data)[:args.samples]
    requests = _requests(bench, samples)
    verifier = verifiers.get(bench.verifier)(**bench.verifier_args)
    ctx = EngineContext(model_name=args.model, model_spec=config.model(args.model), device=args.device)
    base = DecodingConfig(gen_length=args.gen_length, steps=args.gen_length, block_length=args.block_length,
                          batch_size=args.batch)
    modes = {"reference": (TorchEngine(ctx), base),
             "prefix": (FastDllmEngine(ctx), base.model_copy(update={"cache": "prefix"})),
             "dual": (FastDllmEngine(ctx), base.model_copy(update={"cache": "dual"})),
             "dual_threshold": (FastDllmEngine(ctx), base.model_copy(update={"cache": "dual",
                                                                             "threshold": args.threshold}))}
    results = {}
    for mode, (engine, cfg) in modes.items():
        n = (args.reference_samples or len(samples)) if mode == "reference" else len(samples)
        results[mode] = _run(engine, requests[:n], samples[:n], cfg, verifier)
        lo, hi = results[mode]["accuracy_ci"]
        print(f"{mode:15s} {results[mode]['tokens_per_s']:9.1f} tok/s  {results[mode]['nfe_per_token']:.3f} NFE/token  "
              f"accuracy {results[mode]['accuracy']:.3f} [{lo:.3f}, {hi:.3f}] partial credit "
              f"{results[mode]['partial_credit']:.3f} (n={results[mode]['samples']})", flush=True)
    verifier.close()
    ref = results["reference"]["tokens_per_s"]
    print(json.dumps({
        "model": args.model, "benchmark": args.benchmark, "device": args.device, "threads": args.threads,
        "gen_length": args.gen_length, "block_length": args.block_length, "batch": args.batch,
        "threshold": args.threshold,
        "speedup": {m: round(r["tokens_per_s"] / ref, 2) for m, r in results.items() if m != "reference"},
        "accuracy": {m: r["accuracy"] for m, r in results.items()},
        "accuracy_ci": {m: r["accuracy_ci"] for m, r in results.items()},
        "accuracy_delta": {m: _paired(r, results["reference"]) for m, r in results.items() if m != "reference"},
        "partial_credit": {m: r["partial_credit"] for m, r in results.items()},
        "accuracy_n": {m: r["samples"] for m, r in results.items()}, "results": results}))


if __name__ == "__main__":
    main()
