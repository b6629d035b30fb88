"""Accuracy against speed for every registered decoding strategy of a model, on the same samples in one run.

    python benchmarks/decode_frontier.py --model tiny-llada --suite sudoku --json out.json
        [--limit 32] [--gen-length 64] [--block-length 32] [--batch 8] [--threads 1] [--out runs/frontier]
        [--repeat 1]

Strategies: every decoder registered for the model's decoding family (``<family>:<remasking>``, each
with its default options), plus every KV cache of ``registry.caches`` that supports the family (Fast-dLLM
prefix and dual, dKV-Cache; low confidence, or maskgit_plus on Dream) and dual + threshold 0.9.
Each is a full ``dare.plan`` / ``dare.evaluate`` run (run.json and samples.jsonl under ``--out``), one
token per step (steps = gen_length). Per strategy the JSON holds accuracy with its interval (and partial credit
where the benchmark has it), NFE per generated token, tokens/s (generated canvas tokens over generation
seconds), the speed-up over the reference (``<family>:low_confidence`` uncached) and the run directory. Tiny
models make the ratios about decoder overheads, not about a paper's quality claims.

``--repeat R`` times every strategy R times, round-robin over the strategies (so a change of machine
load falls on all of them alike, not on whichever ran then), and keeps under ``--out`` the run with the
median tokens/s; the JSON lists every repeat's tokens/s. Tokens and NFE do not change between repeats
(checked: a strategy whose accuracy or NFE moves is reported and stops the script).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import shutil
import tempfile
from pathlib import Path

import torch

from dare.harness.plan import EvalRequest, evaluate, plan
from dare.harness.registry import caches, decoders, load_plugins

#: Besides every cache of ``registry.caches`` at its defaults (``fastdllm:<cache>``), these settings of one.
CACHE_VARIANTS = {"fastdllm:dual_threshold": ["cache=dual", "threshold=0.9"]}


def strategies(family: str) -> dict[str, tuple[str, list[str]]]:
    """label -> (engine, overrides); the reference first."""
    seen, out = set(), {}
    names = sorted((n for n in decoders.names() if n.startswith(family + ":")),
                   key=lambda n: (n != f"{family}:low_confidence", n))
    for name in names:
        decode = decoders.get(name)
        if id(decode) in seen:  # an alias of a decoder already listed
            continue
        seen.add(id(decode))
        out[name] = ("torch", [f"remasking={name.split(':', 1)[1]}"])
    supported = [name for name in caches.names() if family in caches.get(name).families]
    cached = {f"fastdllm:{name}": [f"cache={name}"] for name in supported}
    cached.update({label: sets for label, sets in CACHE_VARIANTS.items()
                   if sets[0] in {f"cache={name}" for name in supported}})
    for label, sets in cached.items():
        out[label] = ("fastdllm", ["remasking=low_confidence" if family == "mdm" else "remasking=maskgit_plus", *sets])
    return out


@functools.cache
def decoding_family(model: str) -> str:
    """The model's decoding family (``mdm``, ``dream``, ``block``), read from its config without weights."""
    from dare.backends.engines.torch import TorchEngine
    from dare.harness import config
    from dare.harness.engine import EngineContext

    return TorchEngine(EngineContext(model_name=model, model_spec=config.model(model))).arch.decoding_family


def common_settings(model: str, sets: list[str], args) -> list[str]:
    """gen_length, steps (one token per step), block_length and batch_size, less what the strategy's decoder does
    not read (the resolver refuses a set field a decoder ignores; ReMix runs each block until full: no steps)."""
    remasking = next(s.split("=", 1)[1] for s in sets if s.startswith("remasking="))
    reads = decoders.get(f"{decoding_family(model)}:{remasking}").reads | {"batch_size"}
    common = {"gen_length": args.gen_length, "steps": args.gen_length, "block_length": args.block_length,
              "batch_size": args.batch}
    return [f"{name}={value}" for name, value in common.items() if name in reads]


def run_one(model: str, suite: str, engine: str, sets: list[str], args, out: str | None = None) -> dict:
    common = common_settings(model, sets, args)
    # a fresh generation cache per run: every strategy is timed generating, never replayed from a cache
    with tempfile.TemporaryDirectory(prefix="frontier-cache-") as cache:
        p = plan(EvalRequest(model=model, suite=suite, engine=engine, overrides=(*common, *sets), limit=args.limit,
                             out=out or args.out, cache_dir=cache))
        record = evaluate(p)
    run = json.loads((p.run_dir / "run.json").read_text())
    rows = [json.loads(line) for line in (p.run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    benchmark = next(iter(run["metrics"]))
    accuracy, partial = run["metrics"][benchmark]["accuracy"], run["metrics"][benchmark].get("partial_credit")
    seconds = sum(v for k, v in run["timing"].items() if k.endswith(".generate_s"))
    tokens = len(rows) * args.gen_length
    return {"accuracy": accuracy["value"], "ci": accuracy["ci"], "n": accuracy["n"],
            "partial_credit": partial["value"] if partial else None,
            "partial_credit_ci": partial["ci"] if partial else None,
            "nfe_per_token": round(sum(r["nfe"] for r in rows) / tokens, 4),
            "nfe_official_per_token": round(sum(r.get("nfe_official") or r["nfe"] for r in rows) / tokens, 4),
            "tokens_per_s": round(tokens / seconds, 1) if seconds else None, "generate_s": seconds,
            "run_dir": str(p.run_dir), "decoder": record.decoder.name if record.decoder else None}


def repeated(chosen: dict[str, tuple[str, list[str]]], args) -> dict[str, dict]:
    """``--repeat``: every strategy ``args.repeat`` times round-robin into a scratch folder; the run with
    the median tokens/s moves to ``--out`` and carries every repeat's tokens/s."""
    scratch = tempfile.mkdtemp(prefix="frontier-repeats-")
    try:
        rows: dict[str, list[dict]] = {label: [] for label in chosen}
        for _ in range(args.repeat):
            for label, (engine, sets) in chosen.items():
                rows[label].append(run_one(args.model, args.suite, engine, sets, args, out=scratch))
        kept = {}
        for label, runs in rows.items():
            if len({(r["accuracy"], r["nfe_per_token"]) for r in runs}) > 1:
                raise SystemExit(f"{label}: accuracy or NFE differs between repeats ({runs}); "
                                 "decoding is not deterministic")
            median = sorted(runs, key=lambda r: r["tokens_per_s"] or 0.0)[len(runs) // 2]
            target = Path(args.out) / Path(median["run_dir"]).name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(median["run_dir"], target)
            kept[label] = {**median, "run_dir": str(target), "tokens_per_s_repeats": [r["tokens_per_s"] for r in runs]}
        return kept
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-llada")
    parser.add_argument("--suite", default="sudoku")
    parser.add_argument("--json", required=True)
    parser.add_argument("--limit", type=int, default=32)
    parser.add_argument("--gen-length", type=int, default=64)
    parser.add_argument("--block-length", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/frontier")
    parser.add_argument("--only", nargs="*", help="labels to run (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per strategy, round-robin; the median is kept")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    load_plugins()
    family = decoding_family(args.model)
    chosen = {k: v for k, v in strategies(family).items() if not args.only or k in args.only}
    results = repeated(chosen, args) if args.repeat > 1 else {}
    for label, (engine, sets) in chosen.items():
        results[label] = results.get(label) or run_one(args.model, args.suite, engine, sets, args)
        row = results[label]
        print(f"{label:24s} acc {row['accuracy']:.3f} {row['ci']} partial {row['partial_credit']}  "
              f"{row['nfe_per_token']:.3f} NFE/token  "
              f"{row['tokens_per_s']} tok/s", flush=True)
    reference = results.get(f"{family}:low_confidence", {}).get("tokens_per_s")
    for row in results.values():
        row["speedup"] = round(row["tokens_per_s"] / reference, 2) if reference and row["tokens_per_s"] else None
    out = {"model": args.model, "suite": args.suite, "family": family, "gen_length": args.gen_length,
           "block_length": args.block_length, "batch_size": args.batch, "limit": args.limit, "threads": args.threads,
           "repeat": args.repeat,
           "machine": f"CPU {torch.backends.cpu.get_cpu_capability()}, {args.threads} torch thread(s)",
           "reference": f"{family}:low_confidence", "strategies": results}
    Path(args.json).write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v["speedup"] for k, v in results.items()}))

if __name__ == "__main__":
    main()
