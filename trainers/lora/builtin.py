"""PEFT: low-rank adapters (LoRA) on the linear layers of a DiffusionTransformer, without extra dependencies.

``W x + (alpha / r) B A x`` with A ~ Kaiming-uniform and B = 0, so the adapted model starts exactly at
the base model. The base weights are frozen; with adapters disabled the network is bit-exactly the base
model, which therefore serves as the reference policy (no second copy, as DARE does with LoRA).
Checkpoints hold the *merged* weights under the official names (loadable by any engine); the adapter
tensors go to the trainer state so a resumed run continues with the same adapters and optimizer moments.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from dare.harness.errors import ConfigError

DEFAULT_TARGETS = ("q", "k", "v", "o", "qkv", "gate", "up", "down")


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update. ``weight``/``bias`` are the base ones."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float, dropout: float = 0.0,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.base = base.requires_grad_(False)
        like = {"dtype": base.weight.dtype, "device": base.weight.device}
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, **like))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, **like))
        with torch.no_grad():
            self.lora_a.copy_(draw_down_projection(self.lora_a.shape, generator))
        self.scale = alpha / rank
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.enabled = True

    @property
    def weight(self) -> torch.Tensor:
        return self.base.weight

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        if not self.enabled:
            return out
        return out + (self.dropout(x) @ self.lora_a.T @ self.lora_b.T) * self.scale

    def merged_weight(self) -> torch.Tensor:
        return self.base.weight + self.scale * (self.lora_b @ self.lora_a).to(self.base.weight.dtype)


def draw_down_projection(shape: torch.Size, generator: torch.Generator | None) -> torch.Tensor:
    """A (rank, in_features) matrix from nn.Linear's Kaiming-uniform (a = sqrt(5)) law, drawn in float64 so
    every backend and dtype gets the same numbers from the same generator state."""
    bound = 1 / math.sqrt(shape[1])
    return (torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1) * bound


def target_linears(net: nn.Module, targets: tuple[str, ...]) -> list[tuple[str, nn.Module, str]]:
    """``(path, parent, attribute)`` of every ``nn.Linear`` whose attribute name is in ``targets``, in
    ``named_modules`` order: the one definition of "which layers get adapters" for every backend."""
    found = []
    for path, module in list(net.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and child_name in targets:
                found.append((f"{path}.{child_name}" if path else child_name, module, child_name))
    return found


def apply_lora(net: nn.Module, rank: int, alpha: float, dropout: float = 0.0,
               targets: tuple[str, ...] = DEFAULT_TARGETS, seed: int = 0) -> list[str]:
    """Freeze ``net`` and wrap every ``nn.Linear`` whose attribute name is in ``targets``; returns their paths.
    Adapter initialisation draws from a generator seeded with ``seed`` (reproducible runs)."""
    net.requires_grad_(False)
    generator = torch.Generator().manual_seed(seed)
    found = target_linears(net, targets)
    for _, parent, name in found:
        setattr(parent, name, LoRALinear(getattr(parent, name), rank, alpha, dropout, generator))
    return [path for path, _, _ in found]


def lora_modules(net: nn.Module) -> Iterator[tuple[str, LoRALinear]]:
    return ((n, m) for n, m in net.named_modules() if isinstance(m, LoRALinear))


@contextmanager
def adapters_disabled(net: nn.Module):
    """Run ``net`` as the base model inside the block."""
    modules = [m for _, m in lora_modules(net)]
    for m in modules:
        m.enabled = False
    try:
        yield
    finally:
        for m in modules:
            m.enabled = True


def adapter_state(net: nn.Module) -> dict[str, torch.Tensor]:
    """Every adapter tensor by its state-dict name (any backend: their names all contain ``.lora_``)."""
    return {k: v.detach().cpu().clone() for k, v in net.state_dict().items() if ".lora_" in k}


def load_adapter_state(net: nn.Module, state: dict[str, torch.Tensor]) -> None:
    current = net.state_dict()
    expected = {k for k in current if ".lora_" in k}
    if set(state) != expected:
        raise ConfigError(f"the saved adapters ({len(state)} tensors) do not match this run's "
                          f"{len(expected)} adapter tensors; start a new run (another --run-name)")
    with torch.no_grad():
        for k, v in state.items():
            current[k].copy_(v)


class MergedView:
    """What ``save_state`` needs (``args`` and ``state_dict()``) with adapters merged under the base names."""

    def __init__(self, net: nn.Module):
        self.args = net.args
        self._net = net

    def state_dict(self) -> dict[str, torch.Tensor]:
        merged = {}
        lora = dict(lora_modules(self._net))
        for key, value in self._net.state_dict().items():
            if ".lora_" in key:
                continue
            owner, _, leaf = key.rpartition(".base.")
            if leaf and owner in lora:
                merged[f"{owner}.{leaf}"] = lora[owner].merged_weight().detach() if leaf == "weight" else value
            else:
                merged[key] = value
        return merged


def plain_state(net: nn.Module) -> dict[str, torch.Tensor]:
    """The network's weights under the base model's parameter names (adapters merged if present)."""
    return MergedView(net).state_dict()


class BuiltinLoRA:
    """The dependency-free :class:`~dare.trainers.lora.backend.LoraBackend` (``lora_backend: builtin``)."""

    def apply(self, net: nn.Module, rank: int, alpha: float, dropout: float, targets: tuple[str, ...],
              seed: int) -> list[str]:
        return apply_lora(net, rank, alpha, dropout, targets, seed)

    def disabled(self, net: nn.Module):
        return adapters_disabled(net)

    def adapter_state(self, net: nn.Module) -> dict[str, torch.Tensor]:
        return adapter_state(net)

    def load_adapter_state(self, net: nn.Module, state: dict[str, torch.Tensor]) -> None:
        load_adapter_state(net, state)

    def merged_state(self, net: nn.Module) -> dict[str, torch.Tensor]:
        return plain_state(net)

    def save_extra(self, net: nn.Module, directory) -> None:
        """Nothing beyond the merged weights: the builtin adapters have no standard on-disk format."""
