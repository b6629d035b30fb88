"""Files a run writes are readable per the umask, like any file ``open`` creates (mkstemp alone gives 0600)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dare.harness.rundir import atomic_write

from .helpers import dare_eval, run_record, write_completions


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask():
    before = os.umask(0o022)
    os.umask(before)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(before)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077])
def test_atomic_write_follows_the_umask(tmp_path, umask, mask):
    umask(mask)
    atomic_write(tmp_path / "run.json", "{}\n")
    assert _mode(tmp_path / "run.json") == 0o666 & ~mask
    assert os.umask(mask) == mask  # reading the umask did not change it


def test_run_files_are_group_and_world_readable_under_umask_022(tmp_path, umask):
    umask(0o022)  # inherited by the dare-eval process
    completions = write_completions(tmp_path / "c.jsonl", [("sudoku/test/0", "<answer>1</answer>")])
    proc = dare_eval("--backend", "replay", "--suite", "sudoku", "--completions", str(completions), "--limit", "1",
                     "--out", str(tmp_path / "runs"))
    run_dir, record = run_record(proc)
    files = [run_dir / "run.json", run_dir / record["samples_path"], *(tmp_path / "runs" / ".cache").rglob("*.jsonl")]
    assert len(files) >= 3
    assert {f.name: _mode(f) for f in files} == {f.name: 0o644 for f in files}
