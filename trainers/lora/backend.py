"""One interface for LoRA implementations, chosen by ``TrainConfig.lora_backend`` through a registry.

``builtin`` (:mod:`.builtin`, no dependency) and ``peft`` (:mod:`.peft`, Hugging Face peft from the
``train`` extra) put adapters on exactly the same ``nn.Linear`` layers, draw the same initial adapters from
``config.seed``, and give the trainer the same services: the base model with adapters switched off (the
reference policy), the adapter tensors (exact resume) and the merged weights under the base names (the
checkpoints every engine loads). Entries are lazy, so the core never imports peft.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from dare.harness.registry import Registry


class LoraBackend(Protocol):
    def apply(self, net: nn.Module, rank: int, alpha: float, dropout: float, targets: tuple[str, ...],
              seed: int) -> list[str]:
        """Freeze ``net``, add adapters to the targeted linears in place; returns their module paths."""

    def disabled(self, net: nn.Module) -> AbstractContextManager[None]:
        """Inside the block ``net`` computes exactly the base model."""

    def adapter_state(self, net: nn.Module) -> dict[str, torch.Tensor]:
        """The adapter tensors (CPU copies) that :meth:`load_adapter_state` puts back."""

    def load_adapter_state(self, net: nn.Module, state: dict[str, torch.Tensor]) -> None: ...

    def merged_state(self, net: nn.Module) -> dict[str, torch.Tensor]:
        """The base model's state dict (its parameter names) with ``W + scale * B @ A`` for adapted weights."""

    def save_extra(self, net: nn.Module, directory: Path) -> None:
        """Write backend-specific files into a checkpoint directory being assembled (e.g. a peft adapter)."""


lora_backends: Registry[type] = Registry("LoRA backend")
lora_backends.register("builtin", "dare.trainers.lora.builtin:BuiltinLoRA")
lora_backends.register("peft", "dare.trainers.lora.peft:PeftLoRA")


def build_lora_backend(name: str) -> LoraBackend:
    """The backend registered as ``name``; construction checks its dependencies (a one-line ConfigError)."""
    return lora_backends.get(name)()


def plain_weights(net: nn.Module, backend: LoraBackend | None) -> dict[str, torch.Tensor]:
    """``net``'s weights under the base names: merged through ``backend`` in a LoRA run, as they are otherwise."""
    return backend.merged_state(net) if backend is not None else net.state_dict()


class WeightsView:
    """What ``save_state`` needs (``args`` and ``state_dict()``): the network's plain (merged) weights."""

    def __init__(self, net: nn.Module, backend: LoraBackend | None):
        self.args = net.args
        self._net, self._backend = net, backend

    def state_dict(self) -> dict[str, torch.Tensor]:
        return plain_weights(self._net, self._backend)


class BaseModelPolicy:
    """The reference policy of a LoRA run: the trainable policy with its adapters switched off."""

    def __init__(self, policy, backend: LoraBackend):
        self._policy, self._backend = policy, backend

    def __getattr__(self, attr: str):
        return getattr(self._policy, attr)

    def token_logp(self, *args, **kwargs):
        with self._backend.disabled(self._policy.net):
            return self._policy.token_logp(*args, **kwargs)
