"""Helpers for CLI tests: run dare-eval in a subprocess, write completions files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def dare_eval(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "dare.harness.cli", "--no-progress", *args], capture_output=True,
                          text=True, env=full_env, timeout=timeout)


def run_record(proc: subprocess.CompletedProcess) -> tuple[Path, dict]:
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    return run_dir, json.loads((run_dir / "run.json").read_text())


def write_completions(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "completion": c}) + "\n" for i, c in rows))
    return path
