"""Package a training run's final checkpoint as a shipped model directory (configs/models/NAME/).

    python -m dare.trainers.experiments.ship RUN_DIR configs/models/tiny-llada

Copies the last complete checkpoint's weights (cast to bf16, the dtype of every shipped checkpoint), its
config and tokenizer files, and next to them the run's ``train_config.json`` and ``metrics.jsonl`` as
``training_config.json`` / ``training_log.jsonl``: the model carries the recipe and the log it came from.
A model trained in stages (each stage's ``--model-path`` the previous stage's final checkpoint) names the
earlier runs, oldest first, with ``--after``; they are kept as ``training_stageK_config.json`` /
``training_stageK_log.jsonl`` (K = 1, 2, ...), the final stage under the names above::

    python -m dare.trainers.experiments.ship runs/stage2 configs/models/tiny-llada-long --after runs/stage1
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

from ..state import checkpoint as ckpt


def ship(run_dir: Path, destination: Path, dtype: torch.dtype = torch.bfloat16,
         after: tuple[Path, ...] = ()) -> Path:
    """Write ``run_dir``'s last complete checkpoint to ``destination`` as a shipped model, ``after`` its
    earlier stages' runs (oldest first); returns ``destination``."""
    for earlier in after:
        if not (earlier / "train_config.json").is_file():
            raise ConfigError(f"--after {earlier}: not a dare-train run (no train_config.json); name the earlier "
                              "stage's run directory")
    final = ckpt.latest(run_dir)
    if final is None:
        raise ConfigError(f"{run_dir} has no complete checkpoint; train first (dare-train ... --out {run_dir.parent})")
    destination.mkdir(parents=True, exist_ok=True)
    for old in [*destination.glob("*.safetensors*"), *destination.glob("training_stage*")]:
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
    for stage, earlier in enumerate(after, 1):
        shutil.copy2(earlier / "train_config.json", destination / f"training_stage{stage}_config.json")
        shutil.copy2(earlier / "metrics.jsonl", destination / f"training_stage{stage}_log.jsonl")
    return destination


def main(argv: list[str] | None = None) -> int:
    """``python -m dare.trainers.experiments.ship RUN DEST [--after EARLIER]``: prints the shipped folder."""
    from dare.harness.cliutil import Parser, run_cli

    parser = Parser(prog="ship", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("destination", type=Path)
    parser.add_argument("--after", type=Path, action="append", default=[], metavar="RUN_DIR",
                        help="an earlier stage's run (repeat, oldest first)")
    args = parser.parse_args(argv)

    def body() -> int:
        sys.stdout.write(f"{ship(args.run_dir, args.destination, after=tuple(args.after))}\n")
        return 0

    return run_cli("ship", body)


if __name__ == "__main__":
    sys.exit(main())
