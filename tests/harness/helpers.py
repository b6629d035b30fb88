"""Helpers for CLI tests: run dare-eval in a subprocess, write completions files, kill a run mid-way, hold a
run directory from a second process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
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


def generated_count(counter: Path) -> int:
    """Generations the plugin engine (tests/harness/plugin_fixture.py) has counted in ``counter``."""
    return sum(int(x) for x in counter.read_text().split()) if counter.exists() else 0


def kill_9_mid_run(args: list[str], env: dict, counter: Path, out: Path, total: int = 60,
                   deadline_s: float = 60) -> int:
    """Run dare-eval ``args`` with the plugin engine slowed down, SIGKILL it once 12 generations are counted,
    check that the cache kept all but the batch in flight, and return the generations made before the kill."""
    proc = subprocess.Popen([sys.executable, "-m", "dare.harness.cli", "--no-progress", *args,
                             "--set", "engine.delay=0.15"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + deadline_s
    while generated_count(counter) < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before_kill = generated_count(counter)
    assert 12 <= before_kill < total, before_kill
    cache_lines = sum(len(p.read_text().splitlines()) for p in (out / ".cache" / "generations").glob("*.jsonl"))
    assert cache_lines >= before_kill - 4  # at most the batch in flight is lost
    return before_kill


def assert_resumed(record: dict, counter: Path, before_kill: int, total: int = 60) -> None:
    """The rerun's record: every finished sample came from the cache, the engine made only the rest."""
    regenerated = generated_count(counter) - before_kill
    counts = record["counts"]["sudoku"]
    assert counts["cached"] + counts["generated"] == total
    assert counts["generated"] == regenerated  # the engine was asked only for what the cache lacked
    assert counts["cached"] >= before_kill - 4, counts
    assert regenerated <= total - (before_kill - 4)


HOLDER = ("import sys, time; from pathlib import Path; from dare.harness.rundir import hold_outputs\n"
          "with hold_outputs(*map(Path, sys.argv[1:])):\n    print('held', flush=True); time.sleep(120)")


def held(*directories: Path) -> subprocess.Popen:
    """A second process holding ``directories`` (dare-eval's run-directory lock) until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, *map(str, directories)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def refused_while_held(out: Path, *args: str) -> None:
    """dare-eval ``args`` while another process holds ``out``: exit 2 with one line naming ``--out``, no run
    directory made."""
    holder = held(out)
    try:
        proc = dare_eval(*args)
    finally:
        holder.kill()
        holder.wait()
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "in use by another dare-eval" in lines[0] and "--out" in lines[0]
    assert not [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")], "no run directory made"
