"""Load a dLLM checkpoint directory into a :class:`LoadedModel` (network + tokenizer + special ids).

The architecture is the ModelSpec's, or detected from config.json (``architectures[0]`` then
``model_type``) through the ``architectures`` registry.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dare.harness.config import SHIPPED_CONFIGS
from dare.harness.errors import ModelError
from dare.harness.registry import architectures

from .architectures import Architecture
from .checkpoint import load_state
from .tokenizer import load_tokenizer
from .transformer import DiffusionTransformer

log = logging.getLogger(__name__)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "added_tokens.json",
                   "special_tokens_map.json", "chat_template.jinja")


@dataclass
class LoadedModel:
    """A ready network with what decoders need: special ids and the architecture's attention kind."""

    arch: Architecture
    net: DiffusionTransformer
    tokenizer: Any
    config: dict[str, Any]
    mask_id: int
    eos_id: int
    pad_id: int
    stop_ids: tuple[int, ...] = field(default_factory=tuple)

    @property
    def device(self) -> torch.device:
        return self.net.lm_head.weight.device


def read_config(path: Path) -> dict[str, Any]:
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise ModelError(f"{path} has no config.json; --model-path must be a Hugging Face checkpoint directory")
    try:
        return json.loads(cfg_file.read_text())
    except json.JSONDecodeError as exc:
        raise ModelError(f"{cfg_file} is not valid JSON ({exc})") from exc


def detect_architecture(config: dict[str, Any], declared: str | None = None) -> Architecture:
    """The registered architecture named by the ModelSpec or by config.json (they must agree)."""
    from_config = [*(config.get("architectures") or []), config.get("model_type")]
    found = _by_layout(config, next((architectures.get(n) for n in filter(None, from_config) if n in architectures),
                                    None))
    if declared:
        wanted = architectures.get(declared) if declared in architectures else None
        if wanted is not None and found is not None and wanted is not found:
            raise ModelError(f"the checkpoint is a {found.name} model (config.json) but the model config says "
                             f"{declared}; check --model / --model-path")
        found = wanted
    if found is not None:
        return found
    candidates = [declared] if declared else from_config
    raise ModelError(f"unknown dLLM architecture {', '.join(map(str, filter(None, candidates))) or '(none)'}; "
                     f"supported: {', '.join(a for a in architectures.names() if a.islower())}")


def _by_layout(config: dict[str, Any], found: Architecture | None) -> Architecture | None:
    """``found``, unless config.json lacks its layout keys and another architecture sharing its model_type has
    them (LLaDA-MoE's config.json says model_type "llada", the dense LLaDA's)."""
    if found is None or all(k in config for k in found.layout_keys):
        return found
    model_type = config.get("model_type")
    sharing = (architectures.get(n) for n in architectures.names())
    return next((a for a in sharing if model_type in a.config_names and a.layout_keys
                 and all(k in config for k in a.layout_keys)), found)


def _first(value: Any) -> int | None:
    return value[0] if isinstance(value, list) and value else value if isinstance(value, int) else None


def resolve_special_ids(arch: Architecture, config: dict, tok, vocab: int, mask_id: int | None = None,
                        eos_id: int | None = None,
                        stop_tokens: Sequence[str] = ()) -> tuple[int, int, int, tuple[int, ...]]:
    """(mask, eos, pad, stop ids): ModelSpec, then config.json, then tokenizer, then the family's known id.
    The stops are EOS, the architecture's end-of-turn tokens the tokenizer has and the model config's
    ``stop_tokens``, which must each be one token of it (a model's own pad, as DiffuCoder-Instruct's)."""
    fallback = arch.mask_id if arch.mask_id is not None and arch.mask_id < vocab else None
    mask = next((m for m in (mask_id, config.get("mask_token_id"), tok.mask_token_id, fallback) if m is not None), None)
    if mask is None or not 0 <= mask < vocab:
        raise ModelError(f"no mask token: neither config.json (mask_token_id), the model config (mask_id) nor the "
                         f"tokenizer (mask_token) defines one inside the vocabulary of {vocab}; add mask_token_id")
    eos = next((e for e in (eos_id, _first(config.get("eos_token_id")), tok.eos_token_id) if e is not None), None)
    if eos is None:
        raise ModelError("no EOS token in config.json or the tokenizer; set eos_id in the model config")
    pad = next(p for p in (_first(config.get("pad_token_id")), tok.pad_token_id, eos) if p is not None)
    stops = {eos}
    for text in arch.stop_texts:
        tid = tok.convert_tokens_to_ids(text)
        if isinstance(tid, int) and tid != tok.unk_token_id:
            stops.add(tid)
    for text in stop_tokens:
        tid = tok.convert_tokens_to_ids(text)
        if not isinstance(tid, int) or tid == tok.unk_token_id or not 0 <= tid < vocab:
            raise ModelError(f"the model config names stop token {text!r}, which this checkpoint's tokenizer does "
                             "not have as one token; is this the checkpoint the model config describes?")
        stops.add(tid)
    return mask, eos, pad, tuple(sorted(stops))


def checkpoint_dir(ctx) -> Path:
    """An engine context's checkpoint: ``--model-path`` as resolved, else one shipped with the package."""
    spec = ctx.model_spec
    path = ctx.model_path or (SHIPPED_CONFIGS / "models" / spec.path if spec and spec.path else None)
    if path is None:
        raise ModelError(f"model {ctx.model_name!r} has no local checkpoint; pass --model-path DIR")
    return Path(path).expanduser()


def load_model(path: Path, arch_name: str | None = None, *, mask_id: int | None = None, eos_id: int | None = None,
               stop_tokens: Sequence[str] = (), device: str | torch.device = "cpu", dtype: torch.dtype | None = None,
               attention: str = "auto") -> LoadedModel:
    """Build the network on ``device`` (float32 on CPU, bfloat16 on CUDA unless ``dtype``) and load weights;
    ``attention`` picks the kernel (see :mod:`.attention`). ``device="meta"`` gives shapes, tokenizer and
    special ids without weights (a driver that only coordinates workers holding the real copies)."""
    path = Path(path).expanduser()
    config = read_config(path)
    arch = detect_architecture(config, arch_name)
    args = arch.build_args(config)
    tok = load_tokenizer(path)
    mask, eos, pad, stops = resolve_special_ids(arch, config, tok, args.vocab_size, mask_id, eos_id, stop_tokens)
    dtype = dtype or (torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32)
    with torch.device("meta"):
        net = DiffusionTransformer(args)
    if torch.device(device).type != "meta":
        load_state(net, arch, path, dtype=dtype, device=device)
    net.use_attention(attention)
    net.eval().requires_grad_(False)
    log.info("loaded %s (%s) from %s on %s", arch.name, dtype, path, device)
    return LoadedModel(arch, net, tok, config, mask, eos, pad, stops)


def fingerprint(path: Path) -> tuple[str, dict[str, Any]]:
    """sha256 over config.json, tokenizer files and each weight file's size + first/last MiB hash."""
    path = Path(path)
    parts: dict[str, Any] = {}
    for name in ("config.json", *TOKENIZER_FILES, "model.safetensors.index.json"):
        if (path / name).is_file():
            parts[name] = hashlib.sha256((path / name).read_bytes()).hexdigest()[:16]
    for weight in sorted(path.glob("*.safetensors")):
        size = weight.stat().st_size
        with weight.open("rb") as f:
            head = f.read(1 << 20)
            f.seek(max(0, size - (1 << 20)))
            tail = f.read(1 << 20)
        parts[weight.name] = {"size": size, "partial_sha256": hashlib.sha256(head + tail).hexdigest()[:16]}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    return digest, parts


__all__ = ["LoadedModel", "load_model", "detect_architecture", "fingerprint", "read_config"]
