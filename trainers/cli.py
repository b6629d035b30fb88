"""dare-train: train a dLLM with a registered algorithm on a suite's train split, then evaluate it.

Exit codes (:func:`dare.harness.cliutil.run_cli`): 0 success, 2 bad input (one-line error), 1 internal
error, 74 out of disk space, 75 stopped by SIGTERM or Ctrl-C within ``--grace`` (the step in flight
finished and was checkpointed), 128 + N stopped at once by a second signal N (130 for Ctrl-C) or at the end
of the grace period (the step in flight is lost). After 74, 75 and 128 + N, rerun the same command to
resume from the last checkpoint: the run ends with the uninterrupted run's weights. The last line on stdout
is the training run directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

from dare.harness import stopping
from dare.harness.cliutil import (
    Parser,
    add_grace_argument,
    add_set_argument,
    check_device,
    emit,
    progress_bars,
    run_cli,
)
from dare.harness.errors import ConfigError
from dare.harness.overrides import Grammar, Section, Vocabulary
from dare.harness.parallel import DEFAULT_WORKER_RESTARTS
from dare.harness.registry import Registry, advantages, algorithms, did_you_mean, estimators, losses
from dare.harness.rundir import check_writable, slug

from .state import RESUME_TRAINING

PROG = "dare-train"
# --engine names that replace the local trainer (the rest are rollout engines of the local trainer)
training_engines: Registry = Registry("training engine")
training_engines.register("verl", "dare.trainers.verl.trainer:build")
log = logging.getLogger("dare.train")


def build_parser() -> Parser:
    p = Parser(prog=PROG, description="Train a diffusion LM with an algorithm plugin (rollouts use the suite's "
               "decoding, prompts and verifiers), checkpoint resumably, then evaluate the final checkpoint.")
    p.add_argument("--algo", help="algorithm or preset: sft, d1, coupled_grpo, dipo, d1_dare, ... (see --list)")
    p.add_argument("--config", help="experiment YAML (a path or a name from configs/experiments)")
    p.add_argument("--model", help="model name from configs/models")
    p.add_argument("--model-path", help="checkpoint directory (config.json, *.safetensors, tokenizer files)")
    p.add_argument("--suite", help="suite or benchmark with a train split: sudoku, countdown, gsm8k, planning")
    p.add_argument("--steps", type=int, help="optimizer steps over rollout batches (default 10)")
    p.add_argument("--seed", type=int)
    p.add_argument("--engine", help="rollout engine (default torch), or verl: train on a Ray/verl worker group")
    p.add_argument("--nnodes", type=int, help="with --engine verl: Ray nodes (start them with `ray start`; default 1)")
    p.add_argument("--gpus-per-node", type=int,
                   help="with --engine verl: workers per node (default: all GPUs, or 2 CPU workers)")
    p.add_argument("--worker-restarts", type=int, metavar="N",
                   help="with --engine verl: dead training workers replaced from the last checkpoint before the run "
                   f"stops (default {DEFAULT_WORKER_RESTARTS})")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--out", default="runs/train", help="directory of training runs (default runs/train)")
    p.add_argument("--run-name", help="run directory name (default from algo, suite, model, seed); reruns resume it")
    add_set_argument(p, "a trainer field (lr=1e-5, group_size=4, prompts_per_step=2, ...), algo.FIELD=V, "
                     "decoding.FIELD=V (rollout and eval) or rollout.FIELD=V (rollout only); repeatable")
    p.add_argument("--dare-compat", action="store_true", help="use the algorithm's DARE preset (X_dare: DARE's "
                   "simplifications of the paper, e.g. one inner step, fixed mask seed, padding counted)")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation of the final checkpoint")
    p.add_argument("--eval-limit", type=int, help="evaluate on the first N samples of each benchmark")
    p.add_argument("--compare", metavar="CONFIG", help="a comparison config (kind: comparison): train every algorithm "
                   "in it from the same start with the same budget, evaluate each, write DIR/comparison.md")
    p.add_argument("--only", metavar="RUN[,RUN]", help="with --compare: train only these runs")
    p.add_argument("--jobs", type=int, default=1, help="with --compare: runs trained at once, in separate processes")
    p.add_argument("--list", action="store_true", help="list algorithms, presets and estimators, then exit")
    p.add_argument("--no-progress", action="store_true", help="no per-step lines or evaluation bars on stderr")
    add_grace_argument(p, "grace_s")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _summary(doc: str | None) -> str:
    """A docstring's first sentence on one line (it may wrap over several)."""
    text = " ".join((doc or "").strip().split("\n\n")[0].split())
    end = re.search(r"\.\s(?=[A-Z])", text)  # a full stop before a capital (not "i.i.d. with")
    return text if end is None else text[:end.start() + 1]


def list_everything() -> str:
    from dare.trainers import plugin  # noqa: F401  (registers the built-ins)

    from .training.config import AlgorithmPreset, catalog, load_yaml_model, preset_names

    lines = ["algorithms:"]
    classes = {id(c): c for c in (algorithms.get(n) for n in algorithms.names())}
    for cls in sorted(classes.values(), key=lambda c: c.name):
        name = cls.name
        needs = cls.needs
        wants = [k for k in ("trajectory", "reference") if getattr(needs, k)]
        kind = "rollout" if needs.rollout else "supervised"
        doc = _summary(cls.__doc__)
        extra = f", {needs.attention} models" if needs.attention else ""
        lines.append(f"  {name} ({kind}{', needs ' + '+'.join(wants) if wants else ''}{extra}): {doc}")
    lines.append("presets (configs/algorithms):")
    for name in preset_names():
        preset = load_yaml_model(catalog("algorithms")[name], AlgorithmPreset)
        lines.append(f"  {name} -> {preset.algorithm}: {preset.description}")
    lines.append("estimators:")
    for name in estimators.names():
        cls = estimators.get(name)
        doc = _summary(cls.__doc__)
        cost = f"{cls.forwards} forward(s)/sequence" if cls.forwards else "one forward per decoding step"
        lines.append(f"  {name} ({cost}): {doc}")
    for title, registry in (("policy losses", losses), ("advantage estimators", advantages)):
        lines.append(f"{title}: " + ", ".join(registry.names()))
    return "\n".join(lines)


def _train_fields() -> list[str]:
    from .training.config import TrainConfig

    return list(TrainConfig.model_fields)


def _train_hint(name: str, fields: list[str]) -> str:
    return f"{did_you_mean(name, fields)} (trainer fields: {', '.join(fields)}; or algo.X, decoding.X, rollout.X)"


#: dare-train's ``--set`` table: a TrainConfig field bare; sections land in the TrainConfig field they
#: fill and are checked there (algorithm config, DecodingConfig). The field names as sections are
#: refused with the command-line spelling.
SETS = Grammar(bare=Section(None, Vocabulary(_train_fields, _train_hint)),
               sections={"algo": Section("algorithm_settings"), "decoding": Section("decoding"),
                         "rollout": Section("rollout_decoding")},
               usage="a trainer field, algo.X, decoding.X or rollout.X",
               renamed={"algorithm": "algo", "algorithm_settings": "algo", "rollout_decoding": "rollout"})


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``--set`` items into TrainConfig flags: algo.X -> algorithm_settings, decoding.X, rollout.X."""
    return SETS.parse(items)


def run(args: argparse.Namespace, argv: list[str]) -> Path:
    from dare.harness.cli import summary
    from dare.harness.config import model_name

    from .state.checkpoint import exclusive
    from .training.config import dare_preset, load_experiment
    from .training.evaluate import evaluate_checkpoint, read_eval_marker, write_eval_marker
    from .training.trainer import LocalTrainer

    flags = parse_sets(args.overrides)
    build_trainer = training_engines.get(args.engine) if args.engine in training_engines else None
    if build_trainer is not None:
        args.engine = None  # rollouts keep the default engine
    flags.update({k: v for k, v in dict(algorithm=args.algo, suite=args.suite, model=args.model,
                                        model_path=args.model_path, steps=args.steps, seed=args.seed,
                                        engine=args.engine, device=args.device, eval_limit=args.eval_limit,
                                        grace_s=args.grace, worker_restarts=args.worker_restarts).items()
                  if v is not None})
    if args.no_eval:
        flags["evaluate"] = False
    if not args.config:
        missing = [f for f, v in (("--algo NAME", args.algo), ("--suite NAME", args.suite),
                                  ("--model NAME or --model-path DIR", args.model or args.model_path)) if not v]
        if missing:
            raise ConfigError(f"missing {', '.join(missing)} (see dare-train --list); e.g. dare-train --algo "
                              f"{args.algo or 'd1'} --model tiny-llada --suite sudoku --steps 2 --eval-limit 8")
    check_device(args.device)
    check_writable(Path(args.out))
    config = load_experiment(args.config, flags)
    if args.dare_compat:
        config = config.model_copy(update={"algorithm": dare_preset(config.algorithm)})
    label = model_name(config.model) if config.model else Path(config.model_path or "model").name  # alias: one dir
    run_dir = Path(args.out) / slug(args.run_name or f"{config.algorithm}-{config.suite}-{label}-s{config.seed}")
    with exclusive(run_dir), stopping.graceful(config.grace_s):
        if build_trainer is not None:
            trainer = build_trainer(config, run_dir, args.nnodes, args.gpus_per_node)
        else:
            trainer = LocalTrainer(config, run_dir)
        final = trainer.train()
        if config.evaluate and final is not None:
            eval_dir = evaluate_checkpoint(trainer, final, run_dir / "eval", config.eval_limit, [PROG, *argv],
                                           progress=progress_bars(not args.no_progress))
            write_eval_marker(run_dir, eval_dir)
    rows = trainer.metrics.rows()
    if rows:
        emit(json.dumps({k: v for k, v in rows[-1].items() if k != "time"}, sort_keys=True))
    eval_dir = read_eval_marker(run_dir) if config.evaluate else None
    if eval_dir is not None and (eval_dir / "run.json").is_file():
        emit(summary(eval_dir))  # the evaluation's metrics, as dare-eval prints them
    return run_dir


def compare(args: argparse.Namespace, argv: list[str]) -> Path:
    from .experiments.compare import ComparisonRunner, load_comparison

    comparison, file = load_comparison(args.compare)
    out = Path(args.out)
    check_writable(out)
    only = [n for n in (args.only or "").split(",") if n]
    summary = ComparisonRunner(comparison, out, [PROG, *argv]).run(only, max(1, args.jobs), str(file))
    emit((out / "comparison.md").read_text().rstrip())
    log.info("%d runs summarised", len(summary["rows"]) - 1)
    return out


def _show_progress(enabled: bool) -> None:
    """Print the trainer's per-step lines (logger dare.train.progress) on stderr; one handler per process."""
    progress = logging.getLogger("dare.train.progress")
    for handler in [h for h in progress.handlers if getattr(h, "dare_progress", False)]:
        progress.removeHandler(handler)
    if enabled:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
        handler.dare_progress = True  # type: ignore[attr-defined]
        progress.addHandler(handler)
    progress.setLevel(logging.INFO if enabled else logging.WARNING)
    progress.propagate = False


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format=f"{PROG}: %(levelname)s: %(message)s")
    _show_progress(not args.no_progress)
    return run_cli(PROG, lambda: _main(args, argv),
                   lambda: RESUME_TRAINING)


def _main(args: argparse.Namespace, argv: list[str]) -> int:
    if args.list:
        emit(list_everything())
        return 0
    emit(compare(args, argv) if args.compare else run(args, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
