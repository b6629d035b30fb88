"""Read and write checkpoints under the official safetensors names (single file or sharded with an index).

Internal parameter names (see :mod:`.transformer`) map to official names through the architecture's
table; per-expert tensors are stacked into (E, out, in) at load and unstacked at save.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from dare.harness.errors import ModelError

from .architectures import Architecture

log = logging.getLogger(__name__)
_LAYER = re.compile(r"^layers\.(\d+)\.")


def official_names(arch: Architecture, internal: str, n_experts: int = 0) -> list[str]:
    """Official tensor name(s) of one internal parameter; a list of E names for a stacked expert tensor."""
    match = _LAYER.match(internal)
    pattern = _LAYER.sub("layers.{i}.", internal) if match else internal
    template = arch.tensor_names.get(pattern)
    if template is None:
        raise ModelError(f"architecture {arch.name!r} has no official name for parameter {internal!r}")
    layer = match.group(1) if match else ""
    if "{e}" in template:
        return [template.format(i=layer, e=e) for e in range(n_experts)]
    return [template.format(i=layer)]


def weight_files(path: Path) -> dict[str, Path]:
    """Official tensor name -> file holding it, from model.safetensors.index.json or the lone shard(s)."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {name: path / fname for name, fname in weight_map.items()}
    shards = sorted(path.glob("*.safetensors"))
    if not shards:
        raise ModelError(f"no *.safetensors weights in {path}; point --model-path at a checkpoint directory")
    found: dict[str, Path] = {}
    for shard in shards:
        with open_shard(shard) as f:
            found.update({k: shard for k in f.keys()})
    return found


def open_shard(shard: Path) -> Any:
    """``safe_open`` with a truncated or corrupt file reported as a one-line ModelError, not a traceback."""
    try:
        return safe_open(str(shard), framework="pt")
    except (SafetensorError, OSError) as exc:
        raise ModelError(f"{shard} is not a readable safetensors file ({exc}); it is truncated or corrupt, "
                         "download it again") from exc


def load_state(model: torch.nn.Module, arch: Architecture, path: Path, dtype: torch.dtype,
               device: torch.device | str = "cpu") -> None:
    """Fill ``model`` in place from the checkpoint at ``path``; every missing tensor is named in the error."""
    files = weight_files(path)
    n_experts = getattr(model.args, "num_experts", 0)
    wanted = {name: official_names(arch, name, n_experts) for name, _ in model.state_dict().items()}
    missing = [o for names in wanted.values() for o in names if o not in files]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ModelError(f"checkpoint {path} lacks {len(missing)} tensor(s) of a {arch.name} model: {shown}")
    handles: dict[Path, Any] = {}
    try:
        state = {}
        for internal, names in wanted.items():
            tensors = []
            for name in names:
                f = handles.get(files[name]) or handles.setdefault(files[name], open_shard(files[name]))
                tensors.append(f.get_tensor(name))
            tensor = torch.stack(tensors) if len(names) > 1 or _is_stacked(internal) else tensors[0]
            keep_fp32 = internal.endswith("expert_bias")  # selection bias: tiny gaps decide routing
            state[internal] = tensor.to(device=device, dtype=torch.float32 if keep_fp32 else dtype)
    finally:
        handles.clear()
    result = model.load_state_dict(state, strict=True, assign=True)
    log.debug("loaded %d tensors from %s (%s)", len(state), path, result)


def _is_stacked(internal: str) -> bool:
    return ".experts_" in internal


def save_state(model: torch.nn.Module, arch: Architecture, path: Path, shards: int = 1) -> None:
    """Write the model's weights under official names: one model.safetensors, or ``shards`` files + index."""
    tensors: dict[str, torch.Tensor] = {}
    n_experts = getattr(model.args, "num_experts", 0)
    for internal, value in model.state_dict().items():
        names = official_names(arch, internal, n_experts)
        parts = value.unbind(0) if _is_stacked(internal) else [value]
        tensors.update({n: t.detach().contiguous().clone() for n, t in zip(names, parts, strict=True)})
    path.mkdir(parents=True, exist_ok=True)
    if shards <= 1:
        save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
        return
    names = sorted(tensors)
    weight_map, total = {}, 0
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        save_file(part, str(path / fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
        total += sum(t.numel() * t.element_size() for t in part.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
