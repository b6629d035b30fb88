"""Does DARE's code verifier give EvalPlus's verdict? Both checkers score the same programs, side by side.

DARE grades HumanEval+ and MBPP+ with its own sandboxed verifier (``dare.harness.verifiers.code``), which
re-implements EvalPlus's rules; this script measures how often the two agree on real model completions, and
lists every case where they do not.

Each input row is ``{"task_id", "solution" | "completion", "source", "model"}`` (one jsonl per source):
``solution`` is a whole program (EvalPlus's field of that name), ``completion`` continues the prompt. Each
row becomes ONE program, built as DARE's verifier builds it (``build_program`` with the dataset's rules from
``dare.harness.sandbox.datasets.DATASETS``; a ``solution`` is the program itself). That same text is then
scored by

- DARE: ``CodeVerifier`` (dataset ``humanevalplus`` / ``mbppplus``) through ``verify_batch``, on DARE's
  shipped samples loaded by benchmark name;
- EvalPlus 0.3.1: ``evalplus.evaluate.check_correctness`` with the ground truth of
  ``evalplus.evaluate.get_groundtruth``, called as ``evalplus.evaluate`` calls it (default
  ``min_time_limit`` and ``gt_time_limit_factor``, ``fast_check`` on, base and plus tests), in a pool of
  worker processes. The EvalPlus data file is given with ``--evalplus-file`` and reaches EvalPlus through
  ``HUMANEVAL_OVERRIDE_PATH`` / ``MBPP_OVERRIDE_PATH``.

DARE's verdict corresponds to EvalPlus's "plus" verdict (base and plus tests all pass). Tasks missing on
either side are skipped and counted. Tasks whose tests differ between DARE's shipped rows and the EvalPlus
file (other inputs, or other expected outputs) are marked ``tests_differ`` so a disagreement there can be
told from a grading difference. Every disagreement is checked again by both sides, alone and serially with
nothing else running, and shown as e.g. "EvalPlus timeout under load, passes alone" or as a genuine one.

Per-row results are appended to ``<out>.rows.jsonl`` as they come, so an interrupted run resumes. The
report is printed, written to ``--out`` (with the program of every disagreement), and summed up as one
JSON object on the last line, like the other benchmarks.

    python benchmarks/evalplus_agreement.py /work/completions/*.jsonl \\
        --evalplus-file humaneval=/work/evalplus_release/he_v0110.jsonl \\
        --evalplus-file mbpp=/work/evalplus_release/mb_v020.jsonl --workers 2 --per-task 10 --out agree.json
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import multiprocessing
import os
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dare.harness import config
from dare.harness.data import load_samples
from dare.harness.records import Sample
from dare.harness.sandbox.codec import CodecError, encode
from dare.harness.verifiers.code import CodeVerifier

log = logging.getLogger("evalplus_agreement")


@dataclass(frozen=True)
class Benchmark:
    evalplus: str  # EvalPlus's dataset name
    dare: str  # DARE's benchmark name
    override_env: str  # how EvalPlus is pointed at a data file
    prefix: str  # task id prefix


BENCHMARKS = {
    "humaneval": Benchmark("humaneval", "humanevalplus", "HUMANEVAL_OVERRIDE_PATH", "HumanEval/"),
    "mbpp": Benchmark("mbpp", "mbppplus", "MBPP_OVERRIDE_PATH", "Mbpp/"),
}


def detect_dataset(task_id: str) -> str:
    for name, bench in BENCHMARKS.items():
        if task_id.startswith(bench.prefix):
            return name
    raise ValueError(f"cannot tell the dataset of task id {task_id!r}; give --dataset")


# ---------------------------------------------------------------- inputs

def read_rows(paths: Iterable[str | Path], per_task: int | None = None, dataset: str | None = None) -> dict:
    """Dataset -> list of rows, each with a stable ``key`` (source, task, rank within them); at most ``per_task``
    rows per (source, task), the first ones in file order."""
    out: dict[str, list[dict]] = collections.defaultdict(list)
    rank: collections.Counter = collections.Counter()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if "solution" not in row and "completion" not in row:
                    raise ValueError(f"{path}:{lineno}: a row needs a 'solution' or a 'completion'")
                row.setdefault("source", str(path))
                row.setdefault("model", "")
                k = rank[row["source"], row["task_id"]]
                rank[row["source"], row["task_id"]] += 1
                if per_task is not None and k >= per_task:
                    continue
                row["key"] = f"{row['source']}|{row['task_id']}|{k}"
                out[dataset or detect_dataset(row["task_id"])].append(row)
    return dict(out)


def dare_samples(bench: Benchmark) -> dict[str, Sample]:
    """DARE's shipped samples of the benchmark, through its normal loader."""
    return {s.id: s for s in load_samples(config.benchmark(bench.dare).data)}


def load_evalplus(bench: Benchmark, data_file: str | Path) -> tuple[dict, dict]:
    """EvalPlus's problems and ground truth (``get_groundtruth``, cached by EvalPlus under its data hash)."""
    os.environ[bench.override_env] = str(Path(data_file).resolve())
    module = sys.modules.get(f"evalplus.data.{bench.evalplus}")
    if module is not None:  # imported earlier in this process: its module constant was read then
        setattr(module, bench.override_env, os.environ[bench.override_env])
    from evalplus.data import get_human_eval_plus, get_human_eval_plus_hash, get_mbpp_plus, get_mbpp_plus_hash
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS
    from evalplus.evaluate import get_groundtruth

    if bench.evalplus == "humaneval":
        problems, digest, not_none = get_human_eval_plus(), get_human_eval_plus_hash(), []
    else:
        problems, digest, not_none = get_mbpp_plus(), get_mbpp_plus_hash(), MBPP_OUTPUT_NOT_NONE_TASKS
    return problems, get_groundtruth(problems, digest, not_none)


# ---------------------------------------------------------------- the two checkers

class SameProgramVerifier(CodeVerifier):
    """DARE's code verifier, given finished programs: ``program`` builds one exactly as the verifier would from
    a completion, and ``verify`` then runs the text it is given unchanged, so both checkers see the same text."""

    def program(self, sample: Sample, completion: str) -> str | None:
        return super()._program(sample, completion)

    def _program(self, sample: Sample, completion: str) -> str | None:
        return completion


def evalplus_args(dataset: str, problem: dict, program: str, expected: dict) -> tuple:
    """Arguments of ``evalplus.evaluate.check_correctness`` as ``evalplus.evaluate`` passes them (fast_check on,
    base and plus, the default time limits)."""
    from evalplus.config import DEFAULT_GT_TIME_LIMIT_FACTOR, DEFAULT_MIN_TIME_LIMIT

    return (dataset, 0, problem, program, expected, False, True, None, DEFAULT_MIN_TIME_LIMIT,
            DEFAULT_GT_TIME_LIMIT_FACTOR)


def evalplus_check(dataset: str, problem: dict, program: str, expected: dict) -> tuple[str, str]:
    """(base status, plus status) from EvalPlus's own check, run here (it starts its own child process)."""
    from evalplus.evaluate import check_correctness

    result = check_correctness(*evalplus_args(dataset, problem, program, expected))
    return result["base"][0], result["plus"][0]


def evalplus_pass(row: dict) -> bool:
    return row["evalplus_base"] == row["evalplus_plus"] == "pass"


def tests_differ(verifier: CodeVerifier, sample: Sample, problem: dict, expected: dict) -> str | None:
    """How DARE's tests for this task differ from EvalPlus's (inputs as the candidate receives them, or expected
    outputs), or None where they match or cannot be compared."""
    from evalplus.eval._special_oracle import MBPP_OUTPUT_SET_EQ_TASKS

    plan = verifier.plan_for(sample)
    try:
        calls = [encode([list(args), {}]) for args in list(problem["base_input"]) + list(problem["plus_input"])]
        wanted = [encode(v) for v in list(expected["base"]) + list(expected["plus"])]
    except CodecError as exc:
        log.info("%s: EvalPlus's tests cannot be put in DARE's wire format (%s); not compared", sample.id, exc)
        return None
    if calls != plan.calls:
        first = next((i for i, (a, b) in enumerate(zip(calls, plan.calls)) if a != b), min(len(calls), len(plan.calls)))
        return f"inputs differ ({len(plan.calls)} in DARE, {len(calls)} in EvalPlus; first at input {first})"
    if problem["entry_point"] in MBPP_OUTPUT_SET_EQ_TASKS:  # compared as sets: the order of the items is noise
        wanted, have = [_unordered(w) for w in wanted], [_unordered(e) for e in plan.expected]
    else:
        have = plan.expected
    if all(e is not None for e in have) and wanted != have:
        first = next((i for i, (a, b) in enumerate(zip(wanted, have)) if a != b), None)
        return f"expected outputs differ (first at input {first})"
    return None


def _unordered(wire: Any) -> Any:
    items = wire.get("t") if isinstance(wire, dict) and "t" in wire else wire
    return sorted(json.dumps(v, sort_keys=True) for v in items) if isinstance(items, list) else wire


# ---------------------------------------------------------------- the run

def run_agreement(rows: Sequence[dict], dataset: str, evalplus_file: str | Path, workers: int = 2,
                  chunk: int = 200, rows_path: Path | None = None, cache_dir: str | Path | None = None) -> list[dict]:
    """Score every row with both checkers; returns one result per row (and appends them to ``rows_path``)."""
    bench = BENCHMARKS[dataset]
    problems, truth = load_evalplus(bench, evalplus_file)
    samples = dare_samples(bench)
    done = _load_done(rows_path)
    results = [done[r["key"]] for r in rows if r["key"] in done]
    todo = [r for r in rows if r["key"] not in done]
    log.info("%s: %d rows, %d already scored, %d to score", dataset, len(rows), len(results), len(todo))

    verifier = SameProgramVerifier(bench.dare, workers=workers, cache_dir=cache_dir)
    ctx = multiprocessing.get_context("spawn")  # the parent runs DARE's sandbox threads: never fork it
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for start in range(0, len(todo), chunk):
                part = _score_chunk(todo[start:start + chunk], dataset, problems, truth, samples, verifier, pool)
                _append(rows_path, part)
                results.extend(part)
                log.info("%s: %d/%d scored", dataset, len(results), len(rows))
        _recheck(results, dataset, problems, truth, samples, verifier, rows_path)
        differ = {tid: tests_differ(verifier, samples[tid], problems[tid], truth[tid])
                  for tid in {r["task_id"] for r in results if not r.get("skipped")}}
        for res in results:
            res["tests_differ"] = differ.get(res["task_id"])
    finally:
        verifier.close()
    return results


def _score_chunk(rows, dataset, problems, truth, samples, verifier, pool) -> list[dict]:
    out, runnable = [], []
    for row in rows:
        res = {k: row[k] for k in ("key", "task_id", "source", "model")}
        res["dataset"] = dataset
        sample, problem = samples.get(row["task_id"]), problems.get(row["task_id"])
        if sample is None or problem is None:
            res["skipped"] = "task not in DARE's set" if sample is None else "task not in the EvalPlus file"
            out.append(res)
            continue
        program = row["solution"] if "solution" in row else verifier.program(sample, row["completion"])
        res["program"] = program
        runnable.append((res, sample, problem, program))
        out.append(res)
    # DARE first, then EvalPlus: the two never compete for the CPUs
    verdicts = verifier.verify_batch([(s, p if p is not None else "") for _, s, _, p in runnable])
    for (res, *_), verdict in zip(runnable, verdicts):
        _put_dare(res, verdict)
    from evalplus.evaluate import check_correctness

    futures = [pool.submit(check_correctness, *evalplus_args(dataset, problem, program or "", truth[res["task_id"]]))
               for res, _, problem, program in runnable]
    for (res, *_), future in zip(runnable, futures):
        result = future.result()
        res["evalplus_base"], res["evalplus_plus"] = result["base"][0], result["plus"][0]
        res["agree"] = res["dare_passed"] == evalplus_pass(res) and res["dare_status"] == "scored"
    return out


def _put_dare(res: dict, verdict) -> None:
    res["dare_passed"], res["dare_status"] = verdict.passed, verdict.status
    details = verdict.details or {}
    res["dare_failure"] = details.get("failure") or details.get("error")
    first = details.get("first_failure")
    if first:
        res["dare_first_failure"] = json.dumps(first)[:300]


def _recheck(results, dataset, problems, truth, samples, verifier, rows_path) -> None:
    """Every disagreement, checked again by both sides, alone and serially (the batch is over by now).

    A timeout under load shows as "timeout" in EvalPlus's status when its whole child is killed, but as "fail"
    when one input overruns its own time limit; either way the rerun tells a timing effect from a real
    difference in grading."""
    changed = []
    for res in results:
        if res.get("skipped") or res.get("agree") or "recheck" in res:
            continue
        program, sample = res["program"] or "", samples[res["task_id"]]
        base, plus = evalplus_check(dataset, problems[res["task_id"]], program, truth[res["task_id"]])
        verdict = verifier.verify_batch([(sample, program)])[0]
        res["recheck"] = {"evalplus_base": base, "evalplus_plus": plus, "dare_passed": verdict.passed,
                          "dare_failure": (verdict.details or {}).get("failure")}
        res["recheck"]["verdict"] = _recheck_verdict(res)
        changed.append(res)
    if changed:
        _append(rows_path, changed)  # later lines win on resume


def _recheck_verdict(res: dict) -> str:
    again = res["recheck"]
    evalplus_alone = again["evalplus_base"] == again["evalplus_plus"] == "pass"
    if evalplus_alone != again["dare_passed"]:
        return "genuine disagreement (rechecked alone)"
    sides = []
    if evalplus_alone != evalplus_pass(res):
        was = "timeout" if "timeout" in (res["evalplus_base"], res["evalplus_plus"]) else "fail"
        sides.append(f"EvalPlus {was} under load, {'passes' if evalplus_alone else 'fails'} alone")
    if again["dare_passed"] != res["dare_passed"]:
        sides.append(f"DARE {res['dare_failure'] or 'pass'} under load, {'passes' if again['dare_passed'] else 'fails'}"
                     " alone")
    return "; ".join(sides)


def _load_done(path: Path | None) -> dict[str, dict]:
    done: dict[str, dict] = {}
    if path is not None and path.is_file():
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    done[row["key"]] = row
    return done


def _append(path: Path | None, rows: list[dict]) -> None:
    if path is None:
        return
    with open(path, "a", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


# ---------------------------------------------------------------- the report

def summarize(results: Sequence[dict]) -> list[dict]:
    """Per (dataset, source): counts and pass rates of both checkers (fractions of the scored rows; with the same
    number of completions per task, as here, this is EvalPlus's pass@1)."""
    groups: dict[tuple, list[dict]] = collections.defaultdict(list)
    for res in results:
        groups[res["dataset"], res["source"]].append(res)
    table = []
    for (dataset, source), group in sorted(groups.items()):
        scored = [r for r in group if not r.get("skipped")]
        n = len(scored) or 1
        table.append({
            "dataset": dataset, "source": source, "model": group[0]["model"], "rows": len(group),
            "skipped": len(group) - len(scored), "scored": len(scored),
            "evalplus_base": sum(r["evalplus_base"] == "pass" for r in scored) / n,
            "evalplus_plus": sum(evalplus_pass(r) for r in scored) / n,
            "dare": sum(r["dare_passed"] for r in scored) / n,
            "agree": sum(r["agree"] for r in scored),
            "disagree": sum(not r["agree"] for r in scored),
            "disagree_tests_differ": sum(not r["agree"] and bool(r.get("tests_differ")) for r in scored),
            "tasks": len({r["task_id"] for r in scored}),
            "tasks_tests_differ": len({r["task_id"] for r in scored if r.get("tests_differ")}),
        })
    return table


def disagreements(results: Sequence[dict]) -> list[dict]:
    return [r for r in results if not r.get("skipped") and not r["agree"]]


def explain(res: dict) -> str:
    """One line: what each side said, and why they may differ."""
    dare = "pass" if res["dare_passed"] else f"fail ({res['dare_failure']})"
    if res["dare_status"] != "scored":
        dare = f"{res['dare_status']} ({res['dare_failure']})"
    line = (f"{res['task_id']:<14} {res['model'] or res['source']}: DARE {dare}; "
            f"EvalPlus base {res['evalplus_base']}, plus {res['evalplus_plus']}")
    if res.get("recheck"):
        line += f" -> rechecked alone: {res['recheck']['verdict']}"
    if res.get("tests_differ"):
        line += f" [tests differ: {res['tests_differ']}]"
    return line


def print_report(results: Sequence[dict]) -> None:
    table = summarize(results)
    print(f"{'dataset':<10} {'model':<36} {'scored':>6} {'skip':>5} {'EP base':>8} {'EP plus':>8} {'DARE':>7} "
          f"{'agree':>6} {'disagr':>6} {'(data)':>6}")
    for t in table:
        print(f"{t['dataset']:<10} {t['model'][:36]:<36} {t['scored']:>6} {t['skipped']:>5} {t['evalplus_base']:>8.1%} "
              f"{t['evalplus_plus']:>8.1%} {t['dare']:>7.1%} {t['agree']:>6} {t['disagree']:>6} "
              f"{t['disagree_tests_differ']:>6}")
    bad = disagreements(results)
    differ = {r["task_id"] for r in results if r.get("tests_differ")}
    print(f"\n{len(differ)} task(s) whose tests differ between DARE's rows and the EvalPlus file (column '(data)'"
          " counts the disagreements on them)")
    print(f"{len(bad)} disagreement(s) of {sum(t['scored'] for t in table)} scored rows")
    for res in sorted(bad, key=lambda r: (r["dataset"], r["task_id"], r["source"])):
        print("  " + explain(res))
        if res.get("dare_first_failure"):
            print(f"      DARE first failure: {res['dare_first_failure'][:200]}")


def write_report(path: Path, results: Sequence[dict], settings: dict) -> None:
    report = {"settings": settings, "summary": summarize(results),
              "skipped": collections.Counter(r["skipped"] for r in results if r.get("skipped")),
              "tests_differ": {r["task_id"]: r["tests_differ"] for r in results if r.get("tests_differ")},
              "disagreements": [{**r, "explanation": explain(r)} for r in disagreements(results)]}
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("completions", nargs="+", help="jsonl files of {task_id, solution|completion, source, model}")
    parser.add_argument("--dataset", choices=sorted(BENCHMARKS), help="default: from the task ids")
    parser.add_argument("--evalplus-file", action="append", default=[], metavar="DATASET=PATH", required=True,
                        help="the EvalPlus release file of a dataset, e.g. mbpp=/path/MbppPlus-v0.2.0.jsonl")
    parser.add_argument("--workers", type=int, default=2, help="DARE sandbox workers and EvalPlus processes")
    parser.add_argument("--per-task", type=int, help="score at most this many completions per source and task")
    parser.add_argument("--chunk", type=int, default=200, help="rows scored per round (bounds memory)")
    parser.add_argument("--out", type=Path, default=Path("evalplus_agreement.json"),
                        help="the JSON report; per-row results go to <out>.rows.jsonl (used to resume)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    files = dict(item.split("=", 1) for item in args.evalplus_file)
    by_dataset = read_rows(args.completions, args.per_task, args.dataset)
    rows_path = args.out.with_suffix(".rows.jsonl")
    results: list[dict] = []
    for dataset, rows in sorted(by_dataset.items()):
        if dataset not in files:
            parser.error(f"{len(rows)} rows are {dataset} tasks: give --evalplus-file {dataset}=PATH")
        results.extend(run_agreement(rows, dataset, files[dataset], args.workers, args.chunk, rows_path))
    import evalplus

    settings = {"completions": [str(p) for p in args.completions], "evalplus_files": files,
                "evalplus_version": evalplus.__version__, "per_task": args.per_task, "workers": args.workers}
    write_report(args.out, results, settings)
    print_report(results)
    scored = [r for r in results if not r.get("skipped")]
    print(json.dumps({"scored": len(scored), "skipped": len(results) - len(scored),
                      "disagreements": len(disagreements(results)),
                      "agreement": sum(r["agree"] for r in scored) / max(1, len(scored)), "report": str(args.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
