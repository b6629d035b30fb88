"""Pieces shared by the command-line tools (dare-eval, dare-train, dare-leaderboard)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import yaml


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and ``--version``: the usage block would bury the message."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action="version", version=f"%(prog)s {package_version()}",
                          help="print the installed dare-dllm version and exit")

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def progress_bars(enabled: bool) -> Callable[[str, int], Any] | None:
    """A factory of tqdm bars on stderr, ``(description, total) -> bar``, or None when disabled."""
    if not enabled:
        return None
    from tqdm import tqdm

    return lambda desc, total: tqdm(total=total, desc=desc, unit="it", file=sys.stderr, dynamic_ncols=True)


def package_version() -> str:
    """The installed distribution's version (the source tree's when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dare-dllm")
    except PackageNotFoundError:
        from dare import __version__

        return __version__


def parse_assignment(item: str) -> tuple[str, Any]:
    """``"key=value"`` -> (key, value parsed as a YAML scalar: ``0.7`` float, ``true`` bool, else text).

    Raises ValueError naming the item when it is not KEY=VALUE.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{item!r} is not KEY=VALUE")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def check_device(device: str | None) -> None:
    """Refuse a ``--device`` this machine cannot run before anything is loaded (PrerequisiteError, exit 2)."""
    if not device:
        return
    import torch

    from .errors import InputError, PrerequisiteError

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise InputError(f"--device {device!r} is not a torch device (use cpu, cuda or cuda:N): {exc}") from exc
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise PrerequisiteError(f"--device {device}: no CUDA device is available (torch {torch.__version__}, {build}); "
                                    "use --device cpu, or install a CUDA build of torch on a machine with a GPU")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise InputError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise PrerequisiteError(f"--device {device}: MPS is not available here; use --device cpu")
