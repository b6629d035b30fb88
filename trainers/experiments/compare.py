"""Algorithm comparisons: every algorithm trained from the same start with the same budget, decoding and seed.

A comparison config (``configs/experiments/compare_*.yaml``, ``kind: comparison``) holds

- ``start``: the model every run begins from: a shipped model (``model: tiny-llada``), or an SFT stage trained
  here by a recipe (``recipe: tiny_sdar_sudoku_sft``, ``init: tiny-sdar``, ``overrides: {steps: 400}``)
  whose final checkpoint is named ``label``;
- ``train``: the TrainConfig fields every run shares (suite, steps, prompts and group sizes, lr, decoding,
  seed), so rollout budget, decoding and seeds are equal by construction;
- ``runs``: one entry per algorithm or preset, with the few per-run overrides the comparison allows;
- ``seeds`` (optional): train every run once per seed (``runs/NAME-sSEED``), the start shared, and report each
  run's mean over the seeds with an interval across them beside the paired interval
  (trainers/experiments/seeds.py).

``dare-compare CONFIG --out DIR`` trains what is missing (each run resumes as ``dare-train`` does), evaluates
the start and every final checkpoint on the suite's test split with that one DecodingConfig, and writes
``comparison.json`` and ``comparison.md``: test metrics with bootstrap intervals and CPU seconds per run.
The run records under DIR feed the leaderboard: ``dare-leaderboard build --runs DIR --out SITE``.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import torch
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dare.harness import config as hcfg
from dare.harness.errors import ConfigError, DareError
from dare.harness.models import resolve
from dare.harness.registry import architectures
from dare.harness.resolve import layered

from ..api import build_algorithm
from ..state import checkpoint as ckpt
from ..training.config import TrainConfig, load_experiment, resolve_algorithm
from ..training.evaluate import evaluate_checkpoint, evaluate_model, read_eval_marker, write_eval_marker
from .tables import CPU_FILE, summarise

log = logging.getLogger(__name__)


class StartSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = Field(None, description="a model from configs/models to start from as shipped")
    recipe: str | None = Field(None, description="experiment config that trains the start (SFT)")
    init: str | None = Field(None, description="with recipe: the untrained tiny model it starts from "
                             "(dare.backends.models.tiny_planning)")
    overrides: dict[str, Any] = Field(default_factory=dict, description="TrainConfig fields over the recipe")
    label: str | None = Field(None, description="the start's model name in records (default: model or recipe)")

    @model_validator(mode="after")
    def _one_source(self) -> StartSpec:
        if (self.model is None) == (self.recipe is None):
            raise ValueError("start needs exactly one of 'model' (a shipped model) or 'recipe' (an SFT stage)")
        if self.recipe and not self.init:
            raise ValueError("a start 'recipe' needs 'init', the untrained tiny model it trains (e.g. tiny-sdar)")
        return self


class RunSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    algorithm: str = Field(description="registered algorithm or preset (configs/algorithms)")
    name: str | None = Field(None, description="run name (default: the algorithm)")
    settings: dict[str, Any] = Field(default_factory=dict, description="TrainConfig overrides for this run only")

    @property
    def run_name(self) -> str:
        return self.name or self.algorithm


class Comparison(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["comparison"]
    description: str = ""
    start: StartSpec
    train: dict[str, Any] = Field(description="TrainConfig fields shared by every run")
    runs: list[RunSpec] = Field(min_length=1)
    seeds: list[int] | None = Field(None, min_length=1, description="train every run once per seed; each "
                                    "trains under runs/NAME-sSEED from the one start")
    threads: int = Field(1, ge=1, description="torch threads of every training and evaluation, the start's "
                         "included, whatever --jobs: a result must not depend on how many ran at once")

    @model_validator(mode="after")
    def _one_seed_source(self) -> Comparison:
        if self.seeds is not None and "seed" in self.train:
            raise ValueError("give the runs' seeds either as 'seeds: [...]' or as 'train.seed', not both")
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds {self.seeds} repeat; list each seed once")
        return self

    def jobs(self) -> list[tuple[str, RunSpec, int | None]]:
        """(run directory name, run, seed or None) of every training: one per run, or one per run and seed,
        seed by seed (an interrupted comparison has whole seeds done, not one algorithm's)."""
        if self.seeds is None:
            return [(run.run_name, run, None) for run in self.runs]
        return [(f"{run.run_name}-s{seed}", run, seed) for seed in self.seeds for run in self.runs]


def load_comparison(path: str) -> tuple[Comparison, Path]:
    """The comparison config at ``path`` (or a name under configs/experiments), validated."""
    file = Path(path)
    if not file.is_file():
        file = hcfg.catalog("experiments").get(path, file)
    if not file.is_file():
        raise ConfigError(f"no comparison config {path!r}; pass a YAML path or a name from configs/experiments")
    data = yaml.safe_load(file.read_text())
    if not isinstance(data, dict) or data.get("kind") != "comparison":
        raise ConfigError("not a comparison config (it needs 'kind: comparison'); train single runs with dare-train",
                          source=str(file))
    try:
        comparison = Comparison.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(hcfg.validation_problems(exc), source=str(file)) from exc
    names = [r.run_name for r in comparison.runs]
    if len(set(names)) != len(names):
        raise ConfigError(f"run names repeat in {names}; give the repeated algorithms distinct 'name's",
                          source=str(file))
    keys = [key for key, _, _ in comparison.jobs()]
    if len(set(keys)) != len(keys) or (comparison.seeds is not None and set(keys) & set(names)):
        raise ConfigError(f"run directories {keys} repeat or shadow a run name; rename the runs", source=str(file))
    return comparison, file


class ComparisonRunner:
    """Trains and evaluates the comparison under ``out``; every stage is skipped once its output exists."""

    def __init__(self, comparison: Comparison, out: Path, command: list[str]):
        self.comparison, self.out, self.command = comparison, out, command
        self.start = comparison.start
        self.label = self.start.label or self.start.model or self.start.recipe
        self.model = self._start_model()
        self.configs = {key: self._run_config(run, seed) for key, run, seed in comparison.jobs()}
        self.shared = next(iter(self.configs.values()))  # suite, engine, dtype, limit and decoding of every run

    # ------------------------------------------------------------------ configs
    def _run_config(self, run: RunSpec, seed: int | None) -> TrainConfig:
        shared = {**self.comparison.train, "algorithm": run.algorithm, "model_label": self.label,
                  "threads": self.comparison.threads, **({} if seed is None else {"seed": seed})}
        config = load_experiment(None, {**shared, **run.settings, "model": self.model})
        algo, settings = resolve_algorithm(config.algorithm, config.algorithm_settings)
        needs = build_algorithm(algo, settings).requirements()
        attention = architectures.get(hcfg.model(config.model).architecture).attention
        if needs.attention and needs.attention != attention:
            raise ConfigError(f"run {run.run_name!r}: algorithm {algo!r} needs a {needs.attention} model and the "
                              f"start is {attention}; move it to a comparison whose start is {needs.attention}")
        return config

    def _start_model(self) -> str:
        """The configs/models entry whose architecture and decoding defaults every run uses."""
        if self.start.model:
            return self.start.model
        from dare.backends.models.tiny_planning import INITIAL

        if self.start.init not in INITIAL:
            raise ConfigError(f"start init {self.start.init!r} is not a tiny model this project can write "
                              f"(known: {', '.join(sorted(INITIAL))})")
        model = load_experiment(self.start.recipe, self.start.overrides).model
        if not model:
            raise ConfigError(f"start recipe {self.start.recipe!r} names no model; add 'model:' to the start's "
                              "overrides so the comparison knows its architecture and decoding")
        return model

    # ------------------------------------------------------------------ stages
    def start_checkpoint(self) -> Path:
        """The start's weights: the shipped model's folder, or the SFT stage's final checkpoint."""
        if self.start.model:
            return resolve(self.start.model, None).path
        stage = self.out / "start"
        init = stage / "init"
        if not (init / "config.json").is_file():
            from dare.backends.models.tiny_planning import write_initial

            write_initial(self.start.init, init)
        # the SFT stage's record names what it trained from; the runs name the result (``label``)
        flags = {**self.start.overrides, "model_path": str(init), "model_label": f"{self.start.init}-init",
                 "threads": self.comparison.threads}
        return self._train_and_evaluate(load_experiment(self.start.recipe, flags), stage / "train")

    def decoding(self):
        """The one DecodingConfig of every evaluation: the start model's defaults with ``train.decoding``."""
        config = self.shared
        return layered(hcfg.model(self.model), config.suite, config.decoding, source="decoding")

    def _train_and_evaluate(self, config: TrainConfig, run_dir: Path) -> Path:
        """Train (resuming), then evaluate the final checkpoint with the comparison's decoding and limit."""
        from ..training.trainer import LocalTrainer

        final = ckpt.latest(run_dir)
        if final is not None and int(final.name.split("-")[1]) == config.steps and read_eval_marker(run_dir):
            return final
        with ckpt.exclusive(run_dir):
            trainer = LocalTrainer(config, run_dir)
            final = trainer.train()  # logs each step's CPU seconds in metrics.jsonl
            began = time.process_time()
            eval_dir = evaluate_checkpoint(trainer, final, run_dir / "eval", self.shared.eval_limit, self.command,
                                           self.decoding())
            write_eval_marker(run_dir, eval_dir)
            _add_eval_cpu(run_dir, time.process_time() - began)
        return final

    def baseline(self, checkpoint: Path) -> Path:
        """The record of the start itself (the SFT stage's own evaluation, or the shipped model's)."""
        folder = self.out / "start" / ("train" if self.start.recipe else "")
        done = read_eval_marker(folder)
        if done is not None:
            return done
        run_dir = evaluate_model(self.label, hcfg.model(self.model), checkpoint, self.shared, self.decoding(),
                                 self.out / "start" / "eval", self.shared.eval_limit, self.command)
        write_eval_marker(folder, run_dir)
        return run_dir

    def run(self, only: list[str] | None = None, jobs: int = 1, config_path: str = "") -> dict[str, Any]:
        """Train and evaluate the start, then the runs named in ``only`` (default all; a run's name selects
        all its seeds, ``NAME-sSEED`` one), ``jobs`` at a time (each in its own ``dare-train --compare``
        process; every run uses ``threads`` torch threads)."""
        jobs_of = {key: run.run_name for key, run, _ in self.comparison.jobs()}
        unknown = sorted(set(only or []) - set(jobs_of) - set(jobs_of.values()))
        if unknown:
            raise ConfigError(f"--only {unknown}: no such run; runs: {', '.join(self.configs)}")
        torch.set_num_threads(self.comparison.threads)  # the start's evaluation runs in this process
        start = self.start_checkpoint()
        baseline = self.baseline(start)
        names = [key for key, name in jobs_of.items() if not only or key in only or name in only]
        if jobs > 1 and len(names) > 1:
            self._parallel(names, jobs, config_path)
        else:
            for name in names:
                config = self.configs[name].model_copy(update={"model_path": str(start)})
                self._train_and_evaluate(config, self.out / "runs" / name)
        return summarise(self.out, self.label, baseline, self.comparison)

    def _parallel(self, names: list[str], jobs: int, config_path: str) -> None:
        threads = str(self.comparison.threads)  # as in a sequential run, so --jobs never changes a result
        env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}

        def one_argv(name: str) -> tuple[list[str], Path]:
            return ([sys.executable, "-m", "dare.trainers.cli", "--compare", config_path, "--out", str(self.out),
                     "--only", name], self.out / "runs" / f"{name}.log")

        codes = dict(zip(names, run_children([one_argv(n) for n in names], env, jobs)))
        failed = [n for n, c in codes.items() if c != 0]
        if failed:
            # each child's own one-line error (a held lock, a bad setting) is what the user needs to read
            errors = "; ".join(f"{n}: {last_error(self.out / 'runs' / f'{n}.log') or f'exit {codes[n]}'}"
                               for n in failed)
            raise DareError(f"runs {failed} failed ({errors}); see {self.out / 'runs'}/NAME.log, "
                            "then rerun to resume them")


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when its parent dies (PR_SET_PDEATHSIG), so a
    killed ``--compare`` (even kill -9) leaves no training running; None where prctl is unavailable.
    Resolved before forking: the forked child only makes the one libc call. Linux sends the signal when
    the forking *thread* ends; each pool thread waits for its child, so that is the parent's death."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call: nothing would signal us
            os._exit(1)

    return arm


def run_child(argv: list[str], env: dict[str, str], log_file: Path, started: Callable | None = None) -> int:
    """Run ``argv`` with its output appended to ``log_file``; it dies with this process. Returns its exit code.
    ``started(proc)`` is told of the child before this waits for it (the pool's interrupt reaches it)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("a") as fh:
        proc = subprocess.Popen(argv, env=env, stdout=fh, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent())
        if started is not None:
            started(proc)
        return proc.wait()


def run_children(jobs: list[tuple[list[str], Path]], env: dict[str, str], workers: int) -> list[int]:
    """Run each ``(argv, log_file)`` with ``run_child``, ``workers`` at a time; their exit codes in order.

    An interrupt of this process alone (``kill -INT``; a terminal's Ctrl-C also reaches the children) is
    passed on to every running child, so each checkpoints and stops, instead of the pool waiting for them
    to finish their training; jobs not yet started never start."""
    lock = threading.Lock()
    running: list[subprocess.Popen] = []
    stopping = threading.Event()

    def started(proc: subprocess.Popen) -> None:
        with lock:
            running.append(proc)
            if stopping.is_set():  # started while the interrupt was being passed on
                proc.send_signal(signal.SIGINT)

    def one(job: tuple[list[str], Path]) -> int:
        if stopping.is_set():
            return 130
        return run_child(job[0], env, job[1], started)

    pool = ThreadPoolExecutor(workers)
    try:
        return list(pool.map(one, jobs))
    except BaseException:
        stopping.set()
        with lock:
            for proc in running:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def last_error(log_file: Path) -> str | None:
    """The last ``dare-train: error:`` line of a child's log, without the prefix."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return None
    found = [line.split("error:", 1)[1].strip() for line in lines if line.startswith("dare-train: error:")]
    return found[-1] if found else None


def _add_eval_cpu(run_dir: Path, seconds: float) -> None:
    """CPU seconds (all threads of this process) of the run's evaluation; training's are per step in
    metrics.jsonl."""
    file = run_dir / CPU_FILE
    spent = json.loads(file.read_text()) if file.is_file() else {}
    spent["eval"] = round(spent.get("eval", 0.0) + seconds, 1)
    file.write_text(json.dumps(spent, sort_keys=True) + "\n")
