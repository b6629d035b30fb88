"""Run directories: naming, atomic writes of ``run.json`` and ``samples.jsonl``, environment facts."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .errors import InputError
from .records import RunRecord

SOURCE_ROOT = Path(__file__).resolve().parent.parent


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "model"


def new_run_dir(out: Path, suite: str, model: str, config_hash: str, created: datetime) -> Path:
    """Create a fresh directory ``<out>/<time>_<suite>_<model>_<hash8>`` (suffixed if it exists)."""
    base = f"{created.strftime('%Y%m%dT%H%M%S')}_{slug(suite)}_{slug(model)}_{config_hash[:8]}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            path = out / (base if n == 0 else f"{base}-{n}")
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue
    except OSError as exc:
        raise InputError(f"cannot create a run directory under {out}: {exc.strerror}; pass a writable --out") from exc
    raise InputError(f"too many runs named {base} under {out}")


def check_writable(out: Path) -> None:
    """Fail early, before any compute, if ``out`` cannot hold run directories."""
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError(f"output directory {out} cannot be created: {probe} is a file; pass a directory as --out")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"output directory {out} is not writable; pass a writable --out")


def atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_run(run_dir: Path, record: RunRecord, rows: list[dict[str, Any]]) -> None:
    """Write samples first, then run.json: a run.json always has its samples beside it."""
    atomic_write(run_dir / record.samples_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    atomic_write(run_dir / "run.json", json.dumps(record.to_json(), indent=2, ensure_ascii=False) + "\n")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(SOURCE_ROOT), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def environment_info() -> dict[str, Any]:
    """Python, packages, platform, accelerator and the source commit (with a dirty flag)."""
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "dare_version": _version("dare-dllm"),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "math_verify": _version("math-verify"),
    }
    torch = sys.modules.get("torch")  # only describe CUDA if a backend already imported torch
    if torch is not None and torch.cuda.is_available():
        env["cuda"] = torch.version.cuda
        env["gpu"] = torch.cuda.get_device_name(0)
    commit = _git("rev-parse", "HEAD")
    if commit:
        env["git_commit"] = commit
        env["git_dirty"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
    return env
