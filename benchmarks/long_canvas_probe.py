"""Per-token accuracy of long-addition checkpoints on held-out test rows: the trend that sizes a full run.

    python benchmarks/long_canvas_probe.py runs/sft-long_addition-tiny-llada-long-init-s0 [--rows 64]

For every ``checkpoints/step-*`` of a dare-train run (and its final ``checkpoint`` if present) it masks each
canvas token of the first ``--rows`` test rows' gold completions with probability t (t = 0.1, 0.5, 1.0; one
fixed mask per t), runs one bidirectional forward and prints the argmax accuracy on the masked tokens as
JSON lines: ``all`` (every masked token of the 160-token canvas but the EOS padding) and ``computed`` (the
tokens that are not copies of the line above: each step's new x digit and carry mark, and the answer
digits). t = 1.0 is the all-masked canvas the first decoding step sees. One forward per (checkpoint, t): no
decoding, so it costs seconds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from mdm_control import forward  # the control's bidirectional forward (benchmarks/ is on sys.path)

from dare.backends.engines.torch import TorchEngine
from dare.harness import config as cfg
from dare.harness.data import load_samples
from dare.harness.engine import EngineContext
from dare.harness.generators.long_addition import DIGITS, WIDTH
from dare.trainers.training.data import TrainItem
from dare.trainers.training.rollout import Verifiers, supervised_batch

GEN_LENGTH = 160
T_VALUES = (0.1, 0.5, 1.0)


def computed_positions(answer_lengths: list[int]) -> torch.Tensor:
    """(B, GEN_LENGTH) bool: each work line's new x digit and carry mark, and the answer's digits."""
    out = torch.zeros(len(answer_lengths), GEN_LENGTH, dtype=torch.bool)
    width = DIGITS + 1
    for line in range(1, DIGITS + 2):
        column = width - line
        out[:, line * WIDTH + column] = True
        out[:, line * WIDTH + width + 1 + column] = True
    start = (DIGITS + 2) * WIDTH + len("<answer>\n")
    for row, n in enumerate(answer_lengths):
        out[row, start:start + n] = True
    return out


def checkpoints(run: Path) -> list[Path]:
    found = sorted((run / "checkpoints").glob("step-*"))
    return found + ([run / "checkpoint"] if (run / "checkpoint" / "config.json").is_file() else [])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--rows", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(1)
    spec = cfg.benchmark("long_addition")
    items = [TrainItem(spec, s) for s in load_samples(spec.data)[:a.rows]]
    for path in checkpoints(a.run):
        engine = TorchEngine(EngineContext(model_name="probe", model_path=str(path), options={"dtype": "float32"}))
        net, mask_id, eos = engine.model.net.eval(), engine.model.mask_id, engine.model.eos_id
        held = supervised_batch(engine, items, Verifiers(), True, GEN_LENGTH)
        y = held.completion_ids
        real = torch.ones_like(y, dtype=torch.bool)
        real[:, 1:] = ~((y[:, 1:] == eos) & (y[:, :-1] == eos))  # the first EOS counts, the padding after it not
        computed = computed_positions([len(it.sample.reference) for it in items])
        row = {"checkpoint": path.name}
        for t in T_VALUES:
            hidden = torch.rand(y.shape, generator=torch.Generator().manual_seed(1)) < t
            with torch.no_grad():
                pred = forward(net, held.prompt_ids, held.prompt_mask, y.masked_fill(hidden, mask_id)).argmax(-1)
            right = pred == y
            row[f"all_t{t}"] = round(float(right[hidden & real].float().mean()), 4)
            row[f"computed_t{t}"] = round(float(right[hidden & computed].float().mean()), 4)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
