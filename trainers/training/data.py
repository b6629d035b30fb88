"""Training data: the suite's train splits, rendered with the evaluation's prompt templates, in a
deterministic order that depends only on (seed, step) so a resumed run sees the same batches.

Supervised pairs take the verifier's gold completion as the response (the completion that scores full
marks), so SFT, RL rewards and evaluation all grade the same answer format.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dare.harness import config as cfg
from dare.harness.data import load_samples
from dare.harness.errors import ConfigError
from dare.harness.prompts import template
from dare.harness.records import Message, Sample


@dataclass(frozen=True)
class TrainItem:
    """One training prompt: its benchmark (for the verifier), the sample and the rendered chat messages."""

    benchmark: cfg.BenchmarkSpec
    sample: Sample

    @property
    def messages(self) -> tuple[Message, ...]:
        """The chat messages, rendered on use (a train split has tens of thousands of rows)."""
        return template(self.benchmark.prompt).render(self.sample)


def train_items(suite_name: str) -> list[TrainItem]:
    """Every train sample of every benchmark of the suite; an error names benchmarks without a train split."""
    suite = cfg.suite(suite_name)
    specs = [cfg.benchmark(b) for b in suite.benchmarks]
    missing = [s.name for s in specs if not s.train]
    if missing:
        with_train = [b for b in cfg.names("benchmarks") if cfg.benchmark(b).train]
        raise ConfigError(f"suite {suite_name!r} has no train split for {', '.join(missing)}; "
                          f"train on one of: {', '.join(with_train)}")
    items = []
    for spec in specs:
        template(spec.prompt)  # a missing template fails here, before any model is loaded
        items.extend(TrainItem(spec, s) for s in load_samples(spec.train))
    return items


def batch_indices(n_items: int, batch_size: int, step: int, seed: int) -> list[int]:
    """Item indices of ``step``: consecutive slices of per-epoch permutations seeded by (seed, epoch)."""
    out: list[int] = []
    start = step * batch_size
    while len(out) < batch_size:
        epoch, offset = divmod(start + len(out), n_items)
        order = torch.randperm(n_items, generator=torch.Generator().manual_seed(seed * 100_003 + epoch))
        take = min(batch_size - len(out), n_items - offset)
        out.extend(order[offset:offset + take].tolist())
    return out


def stop_mask(completion: torch.Tensor, stop_ids: tuple[int, ...]) -> torch.Tensor:
    """(B, T) bool: tokens up to and including the first stop token (all tokens if there is none)."""
    is_stop = torch.isin(completion, torch.tensor(stop_ids, device=completion.device))
    before = is_stop.long().cumsum(1) - is_stop.long()  # stops strictly before each position
    return before == 0


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded (B, P) ids and mask."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r):] = True
    return ids, mask
