"""Throughput of the sandboxed code verifier on HumanEval reference solutions, against EvalPlus's checker.

Both sides grade the same 164 programs on the same inputs, expected outputs and time limits (the
verifier's trusted test plans), with the same number of parallel workers, in this one process:
DARE through ``CodeVerifier.verify_batch`` (every job a fresh process tree forked by a clean per-slot
zygote into new namespaces, dropped uid, seccomp, rlimits, comparison in the parent), EvalPlus through
``evalplus.eval.untrusted_check`` (fork + in-process guard). Also timed: the same batch with a new
bubblewrap sandbox per job (``fresh_sandbox_per_sample``), and the cost of one trivial job (one call
returning a constant) through a zygote and through a new sandbox, sequentially on one slot.
Without evalplus the comparison is skipped with a note. ``HUMANEVAL_OVERRIDE_PATH`` is pointed at a
local file so EvalPlus never reaches the network.

    python benchmarks/sandbox_speed.py [--rounds 2] [--workers N] [--limit 164] [--job-runs 40]

The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dare.harness.data import load_samples
from dare.harness.sandbox.codec import decode, encode
from dare.harness.sandbox.plain import to_python
from dare.harness.sandbox.pool import Sandbox, default_workers
from dare.harness.verifiers.code import CodeVerifier


def load_evalplus(workdir: Path):
    """``untrusted_check`` or None (with the reason), kept offline through HUMANEVAL_OVERRIDE_PATH."""
    override = workdir / "HumanEvalOffline.jsonl"
    rows = [{"task_id": s.id, "prompt": s.prompt, "entry_point": s.metadata["entry_point"],
             "canonical_solution": s.metadata["canonical_solution"], "test": s.metadata["test"]}
            for s in load_samples("humaneval.jsonl")]
    override.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.environ.setdefault("HUMANEVAL_OVERRIDE_PATH", str(override))
    try:
        from evalplus.eval import untrusted_check
    except ImportError as exc:
        return None, f"evalplus not importable ({exc}); comparison skipped"
    return untrusted_check, None


def run_dare(verifier: CodeVerifier, items: list) -> tuple[float, int]:
    start = time.perf_counter()
    verdicts = verifier.verify_batch(items)
    return time.perf_counter() - start, sum(v.passed for v in verdicts)


def run_evalplus(untrusted_check, jobs: list, workers: int) -> tuple[float, int]:
    def one(job):  # evalplus's own defaults: 1 s floor, 4 x the reference time
        status, _ = untrusted_check("humaneval", job["code"], job["inputs"], job["entry_point"], job["expected"],
                                    0, job["ref_time"])
        return status == "pass"

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        passed = sum(pool.map(one, jobs))
    return time.perf_counter() - start, passed


def evalplus_jobs(verifier: CodeVerifier, samples: list) -> list:
    jobs = []
    for sample in samples:
        plan = verifier.plan_for(sample)
        jobs.append({"code": sample.prompt + sample.metadata["canonical_solution"], "entry_point": plan.entry_point,
                     "inputs": [to_python(decode(c)[0]) for c in plan.calls],
                     "expected": [to_python(decode(e)) for e in plan.expected],  # evalplus wants Python's own sets
                     "ref_time": [t or 0.0 for t in plan.ref_times]})
    return jobs


def job_cost_ms(warm: bool, runs: int) -> float:
    """Mean wall time of a trivial job, one slot, sequential: the per-job price of the process model."""
    job = {"mode": "call", "program": "def f():\n    return 1\n", "entry_point": "f", "inputs": [encode([[], {}])],
           "limits": [5.0], "load_limit": 5.0}
    sandbox = Sandbox(workers=1, warm=warm)
    try:
        sandbox.run_job(job, 30)  # start-up of the slot is not a per-job cost
        start = time.perf_counter()
        for _ in range(runs):
            sandbox.run_job(job, 30)
        return 1000 * (time.perf_counter() - start) / runs
    finally:
        sandbox.close()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--limit", type=int, default=164)
    parser.add_argument("--job-runs", type=int, default=40)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="dare-sandbox-bench-"))
    untrusted_check, note = load_evalplus(workdir)
    samples = load_samples("humaneval.jsonl")[: args.limit]
    verifier = CodeVerifier("humaneval", workers=args.workers, cache_dir=workdir)
    try:
        verifier.sandbox.map(verifier.plan_for, samples)  # plans are built once and cached: not timed
        items = [(s, verifier.gold_completion(s)) for s in samples]
        jobs = evalplus_jobs(verifier, samples) if untrusted_check else []
        dare_s, evalplus_s, dare_passed, evalplus_passed = 0.0, 0.0, 0, 0
        for _ in range(args.rounds):  # interleaved, so machine load hits both sides alike
            seconds, dare_passed = run_dare(verifier, items)
            dare_s += seconds
            if untrusted_check:
                seconds, evalplus_passed = run_evalplus(untrusted_check, jobs, args.workers)
                evalplus_s += seconds
        described = verifier.describe()
    finally:
        verifier.close()
    cold = CodeVerifier("humaneval", workers=args.workers, cache_dir=workdir, fresh_sandbox_per_sample=True)
    try:  # the stricter mode: a new bubblewrap sandbox and interpreter for every sample
        cold_s, _ = run_dare(cold, items)
    finally:
        cold.close()
        shutil.rmtree(workdir, ignore_errors=True)
    zygote_ms, fresh_ms = job_cost_ms(True, args.job_runs), job_cost_ms(False, args.job_runs)
    n = len(samples) * args.rounds
    result = {"benchmark": "sandbox_speed", "samples": len(samples), "rounds": args.rounds, "workers": args.workers,
              "isolation": described["backend"], "uid_drop": described["uid_drop"],
              "process_model": "zygote fork per job" if described["warm_servers"] else "new sandbox per job",
              "dare_samples_per_s": round(n / dare_s, 2), "dare_passed": dare_passed,
              "dare_fresh_sandbox_samples_per_s": round(len(samples) / cold_s, 2),
              "trivial_job_ms_zygote": round(zygote_ms, 1), "trivial_job_ms_fresh_sandbox": round(fresh_ms, 1)}
    if untrusted_check:
        result.update({"evalplus_samples_per_s": round(n / evalplus_s, 2), "evalplus_passed": evalplus_passed,
                       "ratio_vs_evalplus": round(evalplus_s / dare_s, 3),
                       "fresh_sandbox_ratio_vs_evalplus": round((evalplus_s / args.rounds) / cold_s, 3)})
    else:
        result["note"] = note
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
