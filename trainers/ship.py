"""Package a training run's final checkpoint as a shipped model directory (configs/models/NAME/).

    python -m dare.trainers.ship RUN_DIR configs/models/tiny-llada

Copies the last complete checkpoint's weights (cast to bf16, the dtype of every shipped checkpoint), its
config and tokenizer files, and next to them the run's ``train_config.json`` and ``metrics.jsonl`` as
``training_config.json`` / ``training_log.jsonl``: the model carries the recipe and the log it came from.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from dare.backends.models.loader import TOKENIZER_FILES
from dare.harness.errors import ConfigError

from . import checkpoint as ckpt


def ship(run_dir: Path, destination: Path, dtype: torch.dtype = torch.bfloat16) -> Path:
    final = ckpt.latest(run_dir)
    if final is None:
        raise ConfigError(f"{run_dir} has no complete checkpoint; train first (dare-train ... --out {run_dir.parent})")
    destination.mkdir(parents=True, exist_ok=True)
    for old in destination.glob("*.safetensors*"):
        old.unlink()
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(final.glob("*.safetensors")):
        tensors.update(load_file(shard))
    save_file({k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()},
              destination / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((final / "config.json").read_text())
    config["torch_dtype"] = str(dtype).removeprefix("torch.")
    (destination / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for name in TOKENIZER_FILES:
        if (final / name).is_file():
            shutil.copy2(final / name, destination / name)
    shutil.copy2(run_dir / "train_config.json", destination / "training_config.json")
    shutil.copy2(run_dir / "metrics.jsonl", destination / "training_log.jsonl")
    return destination


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m dare.trainers.ship RUN_DIR DESTINATION")
    print(ship(Path(sys.argv[1]), Path(sys.argv[2])))
