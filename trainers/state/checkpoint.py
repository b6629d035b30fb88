"""Resumable checkpoints and the metrics log of a training run directory.

Layout: ``RUN/train_config.json``, ``RUN/metrics.jsonl`` (one line per finished step), and
``RUN/checkpoints/step-NNNNNN/`` = a loadable Hugging Face-layout checkpoint (official tensor names,
config and tokenizer files copied from the base model) + ``trainer_state.pt`` (optimizer, step, fingerprint).
A checkpoint is written to ``*.tmp`` and renamed, so a kill never leaves a half checkpoint; on resume the
metrics lines after the checkpoint's step are dropped, so no step is logged twice.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from dare.backends.models.checkpoint import save_state
from dare.backends.models.loader import TOKENIZER_FILES
from dare.harness.diskfull import append_all, writing
from dare.harness.errors import ConfigError
from dare.harness.rundir import atomic_write, hold

from ..lora.backend import LoraBackend, WeightsView

log = logging.getLogger(__name__)
STATE_FILE = "trainer_state.pt"


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = run_dir / "checkpoints"
    found = [p for p in root.glob("step-*")
             if p.is_dir() and not p.name.endswith(".tmp") and (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def latest(run_dir: Path) -> Path | None:
    dirs = checkpoint_dirs(run_dir)
    return dirs[-1] if dirs else None


def save(run_dir: Path, step: int, policy, base_path: Path, optimizer, extra: dict[str, Any], keep: int,
         lora: LoraBackend | None = None) -> Path:
    """Write checkpoint ``step`` atomically and prune all but the newest ``keep``; ``lora``: the run's LoRA
    backend (merged weights under the base names, adapters in the trainer state, its extra files)."""
    final = run_dir / "checkpoints" / f"step-{step:06d}"
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    # what the writes need, for the message of a full disk: the weights and up to two optimizer moments each
    needed = 3 * sum(t.numel() * t.element_size() for t in policy.net.state_dict().values())
    try:
        with writing(tmp, needed):
            tmp.mkdir(parents=True)
            save_state(WeightsView(policy.net, lora), policy.loaded.arch, tmp)  # adapters merged: loadable anywhere
            for name in ("config.json", *TOKENIZER_FILES):
                if (base_path / name).is_file():
                    shutil.copy2(base_path / name, tmp / name)
            if lora is not None:
                lora.save_extra(policy.net, tmp)
            adapters = lora.adapter_state(policy.net) if lora is not None else {}
            state = {"step": step, "optimizer": optimizer.state_dict(), "lora": adapters, **extra}
            torch.save(state, tmp / STATE_FILE)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a half checkpoint would hold the space the rerun needs
        raise
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in checkpoint_dirs(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_state(checkpoint: Path) -> dict[str, Any]:
    return torch.load(checkpoint / STATE_FILE, map_location="cpu", weights_only=False)


def check_same_run(run_dir: Path, fingerprint: str, config: dict[str, Any]) -> None:
    """Write the run's config on first use; refuse to resume a run that was started with other settings."""
    file = run_dir / "train_config.json"
    if file.is_file():
        saved = json.loads(file.read_text())
        if saved.get("fingerprint") != fingerprint and _fingerprint_now(saved.get("config")) != fingerprint:
            raise ConfigError(f"{run_dir} holds a run with different settings "
                              f"({_differences(saved.get('config'), config)}); "
                              "pass another --run-name (or remove the directory) to start a new run")
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps({"fingerprint": fingerprint, "config": config}, indent=2, sort_keys=True))


@contextmanager
def exclusive(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for one process (:func:`dare.harness.rundir.hold`, the lock dare-eval takes on its
    --out): a second trainer on the same run would interleave its steps and checkpoints with ours."""
    with hold(run_dir, f"{run_dir} is being trained by another process; wait for it to finish, or pass "
                       "another --run-name / --out", ConfigError):
        yield


def _differences(saved: dict[str, Any] | None, now: dict[str, Any]) -> str:
    """``"lr: 1e-05 there, 0.5 now; algo.beta: default there, 0.1 now"`` for the fingerprinted settings."""
    from ..training.config import TrainConfig

    try:
        old = TrainConfig.model_validate(saved or {}).fingerprint_data()
    except ValueError:
        return "saved settings this version no longer reads"
    new = TrainConfig.model_validate(now).fingerprint_data()

    prefix = {"algorithm_settings": "algo", "rollout_decoding": "rollout"}  # as --set spells them

    def flat(data: dict[str, Any]) -> dict[str, Any]:
        return {f"{prefix.get(k, k)}.{sub}" if isinstance(v, dict) else k: sv for k, v in data.items()
                for sub, sv in (v.items() if isinstance(v, dict) else [(None, v)])}

    def shown(values: dict[str, Any], key: str) -> str:
        if key in values:
            return repr(values[key])
        field = TrainConfig.model_fields.get(key)
        return f"{field.default!r} (default)" if field is not None and "." not in key else "unset"

    old, new = flat(old), flat(new)
    parts = [f"{key} {shown(old, key)} there, {shown(new, key)} now"
             for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)]
    return "; ".join(parts) or "same settings, other hashing"


def _fingerprint_now(saved: dict[str, Any] | None) -> str | None:
    """The saved settings' fingerprint as this version computes it: a run written before a field was added
    (or before a change of the hashing) still resumes when its settings are the same."""
    from ..training.config import TrainConfig

    try:
        return TrainConfig.model_validate(saved or {}).fingerprint()
    except ValueError:  # settings this version no longer accepts: not the same run
        return None


class MetricsLog:
    """Append-only JSONL, flushed and fsync'd per line; :meth:`truncate` drops steps after a checkpoint."""

    def __init__(self, path: Path):
        self.path = path

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        rows = []
        for line in self.path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:  # a line torn by a kill mid-append: its step is redone from the checkpoint
                continue
        return rows

    def truncate(self, last_step: int) -> None:
        kept = [r for r in self.rows() if r["step"] <= last_step]
        atomic_write(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))

    def append(self, row: dict[str, Any]) -> None:
        append_all(self.path, (json.dumps(row, sort_keys=True) + "\n").encode())  # whole lines only
