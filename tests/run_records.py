"""What a training run directory holds, for tests that compare two runs: a checkpoint's weights, the metrics."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

TIMINGS = ("time", "cpu_s")


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint directory's safetensors files, by name."""
    return {k: v for f in sorted(checkpoint.glob("*.safetensors")) for k, v in load_file(str(f)).items()}


def metric_rows(run_dir: Path, timings: bool = False) -> list[dict]:
    """The run's metrics.jsonl rows; without the seconds fields unless ``timings`` (they differ run to run)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return rows if timings else [{k: v for k, v in r.items() if k not in TIMINGS} for r in rows]
