"""``lora_backend: peft``: the LoRA adapters of Hugging Face peft, injected into DARE's own network.

The DiffusionTransformer is a plain ``nn.Module`` (not a transformers PreTrainedModel), so adapters go in
with ``peft.inject_adapter_in_model`` on the exact module paths :func:`.lora.target_linears` picks for the
builtin backend; the initial ``lora_A`` are redrawn from ``config.seed`` with the builtin draw (``lora_B``
starts at 0), so both backends start from the same adapters. Each peft ``LoraLayer`` keeps the frozen
``nn.Linear`` as ``base_layer``; switching adapters off (the tuner layers' ``enable_adapters``) runs
that layer alone, i.e. the base model bit-exactly. A checkpoint additionally holds a standard peft adapter
(``peft_adapter/adapter_config.json`` + ``adapter_model.safetensors``, in the layout of
``PeftModel.save_pretrained``), in a sub-directory so engines that read ``*.safetensors`` or look for
``adapter_config.json`` at the top see only the merged weights:

    net = load_model(BASE_MODEL_DIR).net       # the run's base model, not the merged checkpoint
    net = PeftModel.from_pretrained(net, "RUN/checkpoints/step-N/peft_adapter")
"""

from __future__ import annotations

import importlib
import logging
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from dare.harness.errors import ConfigError

from .builtin import adapter_state, draw_down_projection, load_adapter_state, target_linears

log = logging.getLogger(__name__)
ADAPTER = "default"  # peft's adapter name; PeftModel.from_pretrained loads a directory under this name
ADAPTER_DIR = "peft_adapter"
PEFT_PREFIX = "base_model.model."  # PeftModel's key prefix in adapter_model.safetensors


def import_peft():
    """The ``peft`` module, or a one-line ConfigError naming the extra to install."""
    try:
        return importlib.import_module("peft")
    except ImportError:
        raise ConfigError("lora_backend=peft needs the peft package, which cannot be imported; "
                          "install the train extra: pip install 'dare-dllm[train]'") from None


class PeftLoRA:
    """:class:`~dare.trainers.lora.backend.LoraBackend` on peft's LoRA tuner layers."""

    def __init__(self):
        self.peft = import_peft()
        self.layer_type = importlib.import_module("peft.tuners.lora").LoraLayer

    def layers(self, net: nn.Module) -> list[tuple[str, nn.Module]]:
        """``(path, LoraLayer)`` in ``named_modules`` order (the order adapters are initialised in)."""
        return [(n, m) for n, m in net.named_modules() if isinstance(m, self.layer_type)]

    def apply(self, net: nn.Module, rank: int, alpha: float, dropout: float, targets: tuple[str, ...],
              seed: int) -> list[str]:
        paths = [path for path, _, _ in target_linears(net, targets)]
        if not paths:
            return []
        net.requires_grad_(False)
        config = self.peft.LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=paths,
                                      bias="none")
        with torch.random.fork_rng(devices=[]):  # peft's own init draws from the global RNG: keep it untouched
            self.peft.inject_adapter_in_model(config, net, adapter_name=ADAPTER)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for _, layer in self.layers(net):
                down, up = layer.lora_A[ADAPTER].weight, layer.lora_B[ADAPTER].weight
                down.copy_(draw_down_projection(down.shape, generator))
                up.zero_()
        adapted = [path for path, _ in self.layers(net)]
        if adapted != paths:  # peft matched other modules than the builtin rule: the backends would differ
            raise ConfigError(f"peft put adapters on {len(adapted)} modules, expected the {len(paths)} linears "
                              f"named {list(targets)}; check lora_targets")
        return paths

    @contextmanager
    def disabled(self, net: nn.Module):
        layers = [layer for _, layer in self.layers(net)]
        for layer in layers:
            layer.enable_adapters(False)
        try:
            yield
        finally:
            for layer in layers:
                layer.enable_adapters(True)  # also makes the adapters trainable again (requires_grad)

    def adapter_state(self, net: nn.Module) -> dict[str, torch.Tensor]:
        return adapter_state(net)

    def load_adapter_state(self, net: nn.Module, state: dict[str, torch.Tensor]) -> None:
        load_adapter_state(net, state)

    @torch.no_grad()
    def merged_state(self, net: nn.Module) -> dict[str, torch.Tensor]:
        """Base names; an adapted weight is ``base_layer.weight + get_delta_weight`` (scale * B @ A)."""
        layers = dict(self.layers(net))
        merged = {}
        for key, value in net.state_dict().items():
            if ".lora_" in key:
                continue
            owner, found, leaf = key.rpartition(".base_layer.")
            if found and owner in layers:
                if leaf == "weight":
                    value = value + layers[owner].get_delta_weight(ADAPTER).to(value.dtype)
                merged[f"{owner}.{leaf}"] = value
            else:
                merged[key] = value
        return merged

    def save_extra(self, net: nn.Module, directory: Path) -> None:
        """``directory/peft_adapter/``: adapter_config.json + adapter_model.safetensors, as peft writes them."""
        out = Path(directory) / ADAPTER_DIR
        out.mkdir(parents=True, exist_ok=True)
        net.peft_config[ADAPTER].save_pretrained(str(out))
        state = self.peft.get_peft_model_state_dict(net, adapter_name=ADAPTER)
        tensors = {PEFT_PREFIX + k: v.detach().cpu().contiguous() for k, v in state.items()}
        save_file(tensors, str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
        log.debug("peft adapter (%d tensors) written to %s", len(tensors), out)
