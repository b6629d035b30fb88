"""The driver's model under ``--engine verl``: tokenizer, special ids and parameter shapes, no weights.

The workers hold the only real copies (FSDP2 shards). The driver still needs the tokenizer (prompt ids,
chat template), the special ids (stop / pad handling of completions), the architecture (checkpoint names)
and parameter names and shapes (the optimizer state it writes into checkpoints), so it builds the network
on the ``meta`` device: shapes without storage. Weights reach the driver only while a checkpoint is
written (:func:`materialise`), and are dropped again before the next step (:func:`release`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from dare.backends.models.loader import LoadedModel, load_model


def weightless_model(path: Path, arch_name: str | None = None, *, mask_id: int | None = None,
                     eos_id: int | None = None, stop_tokens: Sequence[str] = ()) -> LoadedModel:
    """``load_model``'s result with every parameter on ``meta`` (resolved exactly as ``load_model`` does)."""
    return load_model(path, arch_name, mask_id=mask_id, eos_id=eos_id, stop_tokens=stop_tokens, device="meta")


def materialise(net: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Give the weightless ``net`` the gathered weights (new parameter objects; the optimizer keeps its own)."""
    net.load_state_dict(state, strict=True, assign=True)


def release(net: torch.nn.Module) -> None:
    """Back to shapes only (no-op when already weightless)."""
    if not net.lm_head.weight.is_meta:
        net.to("meta")
