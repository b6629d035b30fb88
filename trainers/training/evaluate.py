"""Automatic evaluation of a trained checkpoint through the harness runner, with the link to its training.

The run record's ``model.training`` names the training run, the algorithm, the base model, the step, the
training config and the inline ``curve`` ([{step, reward, accuracy, loss, kl_ref, clip_fraction}, ...]) that
the leaderboard draws next to the trained model and on its training page.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from dare.harness.plan import EvalRequest, evaluate, plan
from dare.harness.records import CurvePoint, TrainingLink

log = logging.getLogger(__name__)
EVAL_MARKER = "eval_run.txt"


def curve(rows: list[dict[str, Any]]) -> list[CurvePoint]:
    """{step, reward, accuracy, loss, kl_ref, clip_fraction} per logged step, each where the step logged it
    (supervised and preference rows have no rewards, unclipped algorithms no clip fraction)."""
    keys = ("reward", "accuracy", "loss", "kl_ref", "clip_fraction")
    return [CurvePoint(step=r["step"], **{k: r[k] for k in keys if k in r}) for r in rows]


def evaluate_model(name: str, spec, path: Path, config, decoding, out_dir: Path, limit: int | None,
                   command: list[str], training: TrainingLink | None = None, device: str | None = None,
                   progress=None) -> Path:
    """Evaluate the checkpoint at ``path`` (records name it ``name``) on ``config.suite`` with ``decoding``
    through ``config.engine``; ``training`` links the record to the run that produced it. Returns the run dir."""
    resolved = plan(EvalRequest(suite=config.suite, engine=config.engine, model_path=path, spec=spec, label=name,
                                limit=limit, device=device or config.device or "cpu", out=out_dir, decoding=decoding,
                                engine_options={"dtype": config.dtype}, training=training, command=command,
                                progress=progress))
    evaluate(resolved)
    log.info("evaluation of %s written to %s", path, resolved.run_dir)
    return resolved.run_dir


def evaluate_checkpoint(trainer, checkpoint: Path, out_dir: Path, limit: int | None, command: list[str],
                        decoding=None, progress=None) -> Path:
    """Evaluate ``checkpoint`` on the training suite with the evaluation DecodingConfig (the training run's, or
    ``decoding``); returns the run dir."""
    cfg = trainer.config
    step = int(checkpoint.name.split("-")[1])
    estimator = trainer.estimator  # the estimator the config's "auto" resolved to, with its options
    training = TrainingLink(
        run=trainer.run_dir.name, run_dir=str(trainer.run_dir), algorithm=trainer.algorithm.name,
        algorithm_config=trainer.algorithm.config.model_dump(mode="json"), base_model=trainer.model_name,
        base_model_path=str(trainer.base_path), step=step, checkpoint=str(checkpoint),
        config=cfg.model_dump(mode="json"), curve=curve(trainer.metrics.rows()),
        **({"estimator": {"name": estimator.name, "options": _jsonable(estimator.options())}} if estimator else {}),
        # the rollouts' decoding and the algorithm's declared additions to it
        **({"rollout": trainer.rollout_record()} if trainer.needs.rollout else {}),
    )
    name = f"{trainer.model_name}+{trainer.algorithm.name}-step{step}"
    return evaluate_model(name, trainer.spec, checkpoint, cfg, decoding or trainer.decoding, out_dir, limit, command,
                          training, device=str(trainer.policy.device), progress=progress)


def _jsonable(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, (bool, int, float, str, type(None), list, tuple)) else repr(v)
            for k, v in options.items()}


def write_eval_marker(directory: Path, eval_dir: Path) -> None:
    """``directory/eval_run.txt``: the evaluation run of a training run, relative to ``directory`` (so the
    folder can move and be read from any working directory)."""
    (directory / EVAL_MARKER).write_text(os.path.relpath(eval_dir, directory) + "\n")


def read_eval_marker(directory: Path) -> Path | None:
    """The evaluation run named by ``directory/eval_run.txt`` (None without one). Markers written before
    they were relative hold a path from the working directory; those are read as written."""
    marker = directory / EVAL_MARKER
    if not marker.is_file():
        return None
    named = Path(marker.read_text().strip())
    return named if named.is_absolute() or not (directory / named).exists() else directory / named
