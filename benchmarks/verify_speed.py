"""Verifier throughput on the shipped data: verdicts per second for math, Countdown and Sudoku.

    python benchmarks/verify_speed.py [--workers N] [--repeat R]

Math grades every GSM8K test and MATH500 row twice: with its own gold completion (must all pass) and with
the next row's (rotated: should almost all fail). The math pool is started and warmed before timing; its
cold start is reported separately. Countdown and Sudoku grade their test sets the same way (R times).
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

from dare.harness.data import load_samples
from dare.harness.verifiers import verifiers


def gold_and_rotated(verifier, samples):
    golds = [verifier.gold_completion(s) or "" for s in samples]
    gold_items = list(zip(samples, golds))
    rotated_items = [(s, golds[(i + 1) % len(samples)]) for i, s in enumerate(samples)]
    return gold_items, rotated_items


def timed(verifier, items, repeat=1):
    start = time.perf_counter()
    for _ in range(repeat):
        verdicts = verifier.verify_batch(items)
    seconds = time.perf_counter() - start
    return verdicts, len(items) * repeat / seconds


def bench_math(workers: int | None) -> dict:
    # One fresh verifier per phase: workers cache parsed answers, and the rotated phase reuses the gold
    # phase's answer strings, so a shared pool would time cache hits instead of math-verify.
    make = verifiers.get("math")
    samples = load_samples("gsm8k_test.jsonl") + load_samples("math500.jsonl")
    out: dict = {"n": len(samples)}
    for phase in ("gold", "rotated"):
        verifier = make(workers=workers)
        items = dict(zip(("gold", "rotated"), gold_and_rotated(verifier, samples)))[phase]
        start = time.perf_counter()
        verifier.verify_batch([(sample, r"\boxed{0}") for sample in samples[: verifier.workers]])  # starts every worker
        out["pool_cold_start_s"] = round(time.perf_counter() - start, 2)
        verdicts, rate = timed(verifier, items)
        verifier.close()
        out["workers"] = verifier.workers
        out[f"{phase}_verdicts_per_s"] = round(rate, 1)
        out[f"{phase}_pass_rate"] = round(sum(v.passed for v in verdicts) / len(verdicts), 4)
        out[f"{phase}_errors"] = sum(v.status == "error" for v in verdicts)
        out[f"{phase}_timeouts"] = sum(bool(v.details.get("timeout")) for v in verdicts)
    return out


def bench_simple(name: str, data_file: str, repeat: int) -> dict:
    verifier = verifiers.get(name)()
    samples = load_samples(data_file)
    start = time.perf_counter()
    gold_items, rotated_items = gold_and_rotated(verifier, samples)
    gold_completion_per_s = len(samples) / (time.perf_counter() - start)
    gold, gold_rate = timed(verifier, gold_items, repeat)
    rotated, rotated_rate = timed(verifier, rotated_items, repeat)
    verifier.close()
    return {
        "n": len(samples), "gold_completions_per_s": round(gold_completion_per_s, 1),
        "gold_verdicts_per_s": round(gold_rate, 1), "rotated_verdicts_per_s": round(rotated_rate, 1),
        "gold_pass_rate": sum(v.passed for v in gold) / len(gold),
        "rotated_pass_rate": round(sum(v.passed for v in rotated) / len(rotated), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=None, help="math worker processes (default min(4, cpus))")
    parser.add_argument("--repeat", type=int, default=20, help="passes over the countdown/sudoku test sets")
    args = parser.parse_args()
    result = {
        "math": bench_math(args.workers),
        "countdown": bench_simple("countdown", "countdown_test.jsonl", args.repeat),
        "sudoku": bench_simple("sudoku", "sudoku_test.jsonl", args.repeat),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
