"""dare-eval: score a model (or completions produced elsewhere) on a suite.

Exit codes (:func:`dare.harness.cliutil.run_cli`): 0 success, 2 bad input (one-line error, no traceback),
74 out of disk space, 75 stopped by SIGTERM or Ctrl-C at a safe point within ``--grace`` (the finished
generations are cached and the finished samples recorded as a partial run), 128 + N stopped at once by a
second signal N (130 for Ctrl-C) or at the end of the grace period, 1 internal error; after 74, 75 and
128 + N, rerun the same command to resume. The last line on stdout is the new run directory.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from . import config as cfg
from . import stopping
from .cliutil import Parser, add_grace_argument, add_set_argument, emit, progress_bars, run_cli
from .dryrun import describe, rule_lines
from .parallel import DEFAULT_WORKER_RESTARTS
from .plan import EvalRequest, evaluate, plan
from .registry import caches, decoders, engines, load_plugins, metrics
from .resolve import layered
from .runner import EvalPlan
from .verifiers import verifiers

log = logging.getLogger("dare.eval")
PROG = "dare-eval"


def build_parser() -> Parser:
    p = Parser(prog=PROG, description="Score a diffusion language model on a benchmark suite with exact, "
               "reproducible decoding settings. Writes run.json and samples.jsonl to a new directory under --out.")
    p.add_argument("--model", help="model name from configs/models (see --list); a free label with --backend replay")
    p.add_argument("--model-path", help="checkpoint directory (config.json, *.safetensors, tokenizer files)")
    p.add_argument("--suite", help="suite or benchmark name: math, code, planning, gsm8k, sudoku, ... (see --list)")
    p.add_argument("--backend", "--engine", dest="backend", default="torch",
                   help="engine: torch (default), replay, ... (see --list)")
    p.add_argument("--completions", help="with --backend replay: JSONL of {\"id\": sample id, \"completion\": text}; "
                   "repeated ids are the k samples")
    p.add_argument("--limit", type=int, help="keep the first N samples of each benchmark, in file order")
    p.add_argument("--seed", type=int, help="decoding seed (same as --set seed=N)")
    p.add_argument("--out", default="runs", help="directory under which the run directory is created (default: runs/)")
    p.add_argument("--cache-dir", help="generation and verdict cache (default: OUT/.cache); reruns resume from it")
    add_set_argument(p, "override a setting: a decoding field (gen_length=256, steps=128, block_length=32, "
                     "temperature=0.7, num_samples=8, batch_size=4, ...), verifier.OPTION=V or engine.OPTION=V; "
                     "repeatable")
    p.add_argument("--workers", type=int, default=1,
                   help="data-parallel engine replicas as Ray actors (one per GPU, or per CPU core); "
                   "needs the rl extra")
    p.add_argument("--worker-restarts", type=int, default=DEFAULT_WORKER_RESTARTS,
                   help="with --workers: dead workers replaced per run, their unfinished work run again with the same "
                   f"seeds, before the run stops (exit 1, finished batches cached; default {DEFAULT_WORKER_RESTARTS})")
    p.add_argument("--device", help="torch device for model engines (default: cuda if available, else cpu)")
    p.add_argument("--unsafe-local-exec", action="store_true",
                   help="let code verification run without OS isolation when none is available (recorded in run.json)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_grace_argument(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the resolved plan (decoding with its hash, engine/decoder/verifier options, data hash, "
                   "prompt template) and exit without generating")
    p.add_argument("--list", action="store_true",
                   help="list suites, benchmarks, engines, models, verifiers and metrics, then exit")
    p.add_argument("-v", "--verbose", action="store_true", help="log more")
    return p


def list_everything() -> str:
    load_plugins()
    lines = ["suites:"]
    for name in cfg.names("suites"):
        lines.append(f"  {name}: {', '.join(cfg.suite(name).benchmarks)}")
    lines.append("benchmarks (each is also a suite; sample id format in brackets):")
    for name in cfg.names("benchmarks"):
        lines.append(f"  {name} [{_id_format(cfg.benchmark(name).data)}]")
    lines.append("engines: " + ", ".join(engines.names()))
    lines.append("decoders (torch, fastdllm; remasking=...): " + ", ".join(decoders.names()))
    lines.append("KV caches (fastdllm; cache=..., any masked-diffusion remasking): " + ", ".join(caches.names()))
    lines.extend(rule_lines())
    lines.append("models (aliases in brackets; default decoding per suite):")
    for name in cfg.names("models"):
        lines.extend(_model_lines(cfg.model(name)))
    lines.append("verifiers: " + ", ".join(verifiers.names()))
    lines.append("metrics: " + ", ".join(metrics.names()))
    lines.append("prompt templates: " + ", ".join(cfg.names("prompts")))
    return "\n".join(lines)


_DECODING_SHOWN = ("gen_length", "steps", "block_length", "remasking", "threshold", "temperature")


def _decoding_text(fields: dict[str, Any]) -> str:
    return " ".join(f"{k}={fields[k]}" for k in _DECODING_SHOWN if k in fields) or "(engine defaults)"


def _model_lines(spec: cfg.ModelSpec) -> list[str]:
    """``name [aliases]`` then one line per suite: the decoding a run of that suite uses, then the
    benchmarks whose own entry applies when one is run alone (``--suite math500``)."""
    aliases = f" [{', '.join(spec.aliases)}]" if spec.aliases else ""
    out = [f"  {spec.name}{aliases}"]
    for suite in cfg.names("suites"):
        if all(cfg.benchmark(b).task == "choice" for b in cfg.suite(suite).benchmarks):
            continue  # scored by likelihood: no decoding
        line = f"    {suite}: {_decoding_text(_model_decoding(spec, suite))}"
        alone = [f"{b}: {_decoding_text(_model_decoding(spec, b))}" for b in cfg.suite(suite).benchmarks
                 if b in spec.decoding]
        out.append(line + (f" (alone: {'; '.join(alone)})" if alone else ""))
    return out


def _model_decoding(spec: cfg.ModelSpec, suite: str) -> dict[str, Any]:
    """The fields a run of ``suite`` takes from the model's settings, through the one resolver (engine
    defaults come on top at run time)."""
    return {k: v for k, v in layered(spec, suite).model_dump().items() if v is not None}


def _id_format(data_file: str) -> str:
    """The first sample id of a data file, as an example of its id format (read without loading the file)."""
    import json

    from .data import DATA_DIR

    try:
        with open(DATA_DIR / data_file, encoding="utf-8") as f:
            return "e.g. " + str(json.loads(f.readline())["id"])
    except (OSError, ValueError, KeyError):
        return "unreadable"


def make_request(args: argparse.Namespace, argv: list[str]) -> EvalRequest:
    """The flags as one :class:`~dare.harness.plan.EvalRequest` (what every caller hands ``dare.plan``)."""
    return EvalRequest(model=args.model, suite=args.suite, engine=args.backend, overrides=args.overrides,
                       model_path=args.model_path, completions=args.completions, limit=args.limit, seed=args.seed,
                       device=args.device, out=args.out, cache_dir=args.cache_dir, workers=args.workers,
                       worker_restarts=args.worker_restarts,
                       unsafe_local_exec=args.unsafe_local_exec, command=[PROG, *argv],
                       progress=progress_bars(not args.no_progress and not args.dry_run), dry_run=args.dry_run)


def make_plan(args: argparse.Namespace, argv: list[str]) -> EvalPlan:
    """The flags resolved by :func:`dare.harness.plan.plan` (the library entry point every caller uses)."""
    return plan(make_request(args, argv))


def summary(run_dir: Path) -> str:
    import json

    record = json.loads((run_dir / "run.json").read_text())
    lines = []
    for bench, values in record["metrics"].items():
        for metric, m in values.items():
            lines.append(f"{bench:>14} {metric:<15} {100 * m['value']:6.2f}  "
                         f"[{100 * m['ci'][0]:.2f}, {100 * m['ci'][1]:.2f}]  n={m['n']}")
        errors = record["counts"][bench].get("error", 0)
        if errors:
            lines.append(f"{bench:>14} infrastructure errors (excluded): {errors}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format=f"{PROG}: %(levelname)s: %(message)s")
    started: list[EvalPlan] = []  # the resolved plan, once there is one: an interruption names its run directory

    def interrupted() -> str:
        where = f"; partial results in {started[0].run_dir}" if started and started[0].run_dir else ""
        return f"finished generations are cached, rerun the same command to resume{where}"

    return run_cli(PROG, lambda: _run(args, argv, started), interrupted)


def _run(args: argparse.Namespace, argv: list[str], started: list[EvalPlan]) -> int:
    if args.list:
        emit(list_everything())
        return 0
    started.append(make_plan(args, argv))
    if args.dry_run:
        emit(describe(started[0]))
        return 0
    with stopping.graceful(args.grace):
        evaluate(started[0])
    run_dir = started[0].run_dir
    emit(summary(run_dir))
    emit(run_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
