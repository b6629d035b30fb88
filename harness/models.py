"""Finding a model's checkpoint: ``--model-path``, then ``$DARE_MODEL_DIR/NAME``, then the local Hugging
Face cache, then a checkpoint shipped with the package; otherwise an error with the download command."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import config as cfg
from .errors import InputError, ModelError


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    spec: cfg.ModelSpec | None
    path: Path | None


def _hf_cache_snapshot(hub_id: str) -> Path | None:
    home = Path(os.environ.get("HF_HUB_CACHE")
                or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub")
    snapshots = home / f"models--{hub_id.replace('/', '--')}" / "snapshots"
    candidates = sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime) if snapshots.is_dir() else []
    return candidates[-1].parent if candidates else None


def resolve(name: str | None, path: str | None, needs_checkpoint: bool = True,
            config_alone: bool = False) -> ResolvedModel:
    """Resolve ``--model`` / ``--model-path`` into a name, its config (if known) and a checkpoint dir;
    ``config_alone`` (a dry run): a known model whose weights are not found resolves with no checkpoint."""
    if path is not None:
        ckpt = Path(path).expanduser()
        if not ckpt.is_dir():
            raise InputError(f"--model-path {path} is not a directory; "
                             "point it at a checkpoint folder with config.json")
        spec = cfg.model(name) if name else None
        return ResolvedModel(spec.name if spec else ckpt.resolve().name, spec, ckpt)
    if name is None:
        raise InputError("no model given; pass --model NAME (see dare-eval --list) or --model-path DIR")
    if not needs_checkpoint:
        # Engines that read outputs produced elsewhere (replay) use the name as a label.
        known = cfg.model_name(name) in cfg.names("models")
        return ResolvedModel(cfg.model(name).name if known else name, cfg.model(name) if known else None, None)
    spec = cfg.model(name)  # a short alias (sdar-8b) resolves to its config (sdar-8b-chat)
    for candidate in _candidates(spec):
        if candidate is not None and (candidate / "config.json").is_file():
            return ResolvedModel(spec.name, spec, candidate)
    if config_alone:
        return ResolvedModel(spec.name, spec, None)
    target = f"$DARE_MODEL_DIR/{spec.name}" if os.environ.get("DARE_MODEL_DIR") else f"~/models/{spec.name}"
    # `hf` is the CLI that huggingface_hub installs now (huggingface-cli is deprecated)
    download = (f"download with `hf download {spec.hub_id} --local-dir {target}`" if spec.hub_id
                else "obtain the checkpoint")
    raise ModelError(f"weights not found for model {spec.name!r}; {download}, "
                     f"then pass --model-path {target} (or set DARE_MODEL_DIR)")


def _candidates(spec: cfg.ModelSpec) -> list[Path | None]:
    out: list[Path | None] = []
    if os.environ.get("DARE_MODEL_DIR"):
        out.append(Path(os.environ["DARE_MODEL_DIR"]).expanduser() / spec.name)
    if spec.hub_id:
        out.append(_hf_cache_snapshot(spec.hub_id))
    if spec.path:
        out.append((cfg.model_config_path(spec.name).parent / spec.path).resolve())
    return out
