"""A run directory belongs to one process: dare-eval and dare-train share one lock
(:func:`dare.harness.rundir.hold`), tested with real second processes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dare.harness.errors import ConfigError, InputError
from dare.harness.rundir import hold, hold_outputs
from dare.trainers.state import checkpoint as ckpt

from .helpers import dare_eval, held, refused_while_held, write_completions

IDS = ["sudoku/test/0", "sudoku/test/1", "sudoku/test/2"]


@pytest.fixture
def completions(tmp_path):
    return write_completions(tmp_path / "c.jsonl", [(i, "<answer>1</answer>") for i in IDS])


def _replay(out: Path, completions: Path):
    return dare_eval("--backend", "replay", "--suite", "sudoku", "--completions", str(completions),
                     "--limit", "3", "--out", str(out))


def test_second_dare_eval_on_the_same_out_exits_2_with_one_line(tmp_path, completions):
    out = tmp_path / "runs"
    refused_while_held(out, "--backend", "replay", "--suite", "sudoku", "--completions", str(completions),
                       "--limit", "3", "--out", str(out))
    # the lock died with its process: the rerun goes through
    assert _replay(out, completions).returncode == 0


def test_a_shared_cache_dir_is_held_too(tmp_path, completions):
    cache = tmp_path / "shared-cache"
    holder = held(cache)
    try:
        proc = dare_eval("--backend", "replay", "--suite", "sudoku", "--completions", str(completions), "--limit", "3",
                         "--out", str(tmp_path / "other"), "--cache-dir", str(cache))
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 2 and "in use by another dare-eval" in proc.stderr, proc.stderr


def test_concurrent_dare_evals_never_duplicate_cache_lines(tmp_path, completions):
    """Two dare-evals started together on one --out: each either runs or exits 2, at least one runs,
    and the caches hold every key once (before the lock, both generated and appended everything)."""
    out = tmp_path / "runs"
    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(lambda _: _replay(out, completions), range(2)))
    codes = sorted(p.returncode for p in procs)
    assert codes in ([0, 0], [0, 2]), [p.stderr for p in procs]
    lines = [line for f in (out / ".cache").rglob("*.jsonl") for line in f.read_text().splitlines()]
    assert lines and len(lines) == len(set(lines))


def test_same_process_may_hold_again_and_the_trainer_uses_the_same_lock(tmp_path):
    run = tmp_path / "run"
    with ckpt.exclusive(run), hold_outputs(run, run / ".cache"):  # a trainer evaluating into its own run
        assert (run / ".lock").is_file()
    holder = held(run)
    try:
        with pytest.raises(ConfigError, match="being trained by another process"):
            with ckpt.exclusive(run):
                pass
        with pytest.raises(InputError, match="in use by another dare-eval"):
            with hold_outputs(run):
                pass
    finally:
        holder.kill()
        holder.wait()
    with hold(run, "busy"):  # released after the holder died
        pass
