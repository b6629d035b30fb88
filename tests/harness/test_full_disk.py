"""Full disks: a write that fails for lack of room (a real small tmpfs; EFBIG through a real RLIMIT_FSIZE)
stops dare-eval with one line naming the path (exit 74), leaves no torn cache line, and the rerun after
freeing room ends with the undisturbed run's samples.jsonl byte for byte. A line torn by a kill is ignored
and regenerated."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..stops import jsonl_keys
from .helpers import dare_eval
from .plugin_fixture import make_plugin

TOTAL = 40


def _args(out: Path) -> list[str]:
    return ["--backend", "sudoku-solver", "--model", "solver", "--suite", "sudoku", "--limit", str(TOTAL),
            "--out", str(out), "--set", "batch_size=4"]


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> dict:
    return {"PYTHONPATH": str(make_plugin(tmp_path_factory.mktemp("plugin") / "site"))}


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory, plugin) -> bytes:
    proc = dare_eval(*_args(tmp_path_factory.mktemp("undisturbed")), env=plugin)
    assert proc.returncode == 0, proc.stderr
    return (Path(proc.stdout.strip().splitlines()[-1]) / "samples.jsonl").read_bytes()


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 74 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _resumes(out: Path, plugin: dict, undisturbed: bytes) -> None:
    cached = len(set(jsonl_keys(out / ".cache" / "generations")))
    assert 0 < cached < TOTAL
    proc = dare_eval(*_args(out), env=plugin)
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    counts = json.loads((run_dir / "run.json").read_text())["counts"]["sudoku"]
    assert counts["cached"] == cached and counts["generated"] == TOTAL - cached
    assert (run_dir / "samples.jsonl").read_bytes() == undisturbed


APPEND_OVER_LIMIT = """
import resource, sys
from pathlib import Path
from dare.harness.cache import JsonlCache
from dare.harness.errors import DiskFullError
from dare.harness.records import Generation
path = Path(sys.argv[1])
cache = JsonlCache(path, Generation)
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 100, resource.RLIM_INFINITY))
try:
    cache.extend([("big", Generation(sample_id="s", text="x" * 1000))])
except DiskFullError as exc:
    print(exc)
"""


def test_an_append_over_the_file_size_limit_leaves_the_cache_as_it_was(tmp_path):
    from dare.harness.cache import JsonlCache
    from dare.harness.records import Generation

    path = tmp_path / "g.jsonl"
    JsonlCache(path, Generation).extend([("a", Generation(sample_id="s", text="one"))])
    before = path.read_bytes()
    proc = subprocess.run([sys.executable, "-c", APPEND_OVER_LIMIT, str(path)], capture_output=True, text=True)
    assert f"cannot write {path}: over this process's file-size limit (RLIMIT_FSIZE" in proc.stdout, proc.stderr
    assert path.read_bytes() == before  # the part that fitted was truncated away: no torn line
    assert "a" in JsonlCache(path, Generation)


def _file_size_limit(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


@pytest.mark.extended
def test_dare_eval_over_the_file_size_limit_exits_74_and_the_rerun_resumes(tmp_path, plugin, undisturbed):
    out = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "dare.harness.cli", "--no-progress", *_args(out)],
                          capture_output=True, text=True, env={**os.environ, **plugin},
                          preexec_fn=_file_size_limit(6000))
    line = _one_error_line(proc)
    [cache_file] = (out / ".cache" / "generations").glob("*.jsonl")
    assert line.startswith(f"dare-eval: error: cannot write {cache_file}: over this process's file-size limit")
    assert "rerun the same command to resume" in line
    assert all(json.loads(x) for x in cache_file.read_text().splitlines())  # whole lines only
    _resumes(out, plugin, undisturbed)


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB tmpfs (needs root, or CAP_SYS_ADMIN)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_dare_eval_on_a_full_disk_exits_74_and_resumes_once_room_is_made(small_disk, plugin, undisturbed):
    out = small_disk / "runs"
    out.mkdir()
    filler = small_disk / "filler"
    with open(filler, "wb") as f:  # leave two pages: room for about 30 of the 40 generations
        f.write(b"\0" * (shutil.disk_usage(small_disk).free - 8192))
    line = _one_error_line(dare_eval(*_args(out), env=plugin))
    [cache_file] = (out / ".cache" / "generations").glob("*.jsonl")
    assert line.startswith(f"dare-eval: error: no space left to write {cache_file}: "), line
    assert " needed, " in line and " free there; free space" in line
    assert all(json.loads(x) for x in cache_file.read_text().splitlines())
    filler.unlink()
    _resumes(out, plugin, undisturbed)


def test_a_torn_cache_line_is_ignored_and_regenerated(tmp_path, plugin, undisturbed):
    out = tmp_path / "runs"
    assert dare_eval(*_args(out), env=plugin).returncode == 0
    for kind in ("generations", "verdicts"):  # killed in the middle of the last append of each
        [path] = (out / ".cache" / kind).glob("*.jsonl")
        data = path.read_bytes()
        path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 40])
    proc = dare_eval(*_args(out), env=plugin)
    assert proc.returncode == 0, proc.stderr
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    counts = json.loads((run_dir / "run.json").read_text())["counts"]["sudoku"]
    assert counts["generated"] == 1 and counts["cached"] == TOTAL - 1
    assert (run_dir / "samples.jsonl").read_bytes() == undisturbed


TRIALS = 20


@pytest.mark.extended
def test_seeded_full_disk_trials(small_disk, plugin, undisturbed):
    """20 seeded trials: an even trial leaves 0 to 23 free pages of the tmpfs (ENOSPC), an odd one caps the file
    size at 0 to 48 KB (EFBIG), so the write that fails is a cache line, samples.jsonl, run.json or a run
    directory's first file, as the seed falls. Each stops in one line with exit 74, keeps whole cache lines
    only, and the rerun with room resumes to the undisturbed samples.jsonl, each request generated once."""
    import random

    failed_at: dict[str, int] = {}
    for trial in range(TRIALS):
        rng = random.Random(trial)
        out = small_disk / "runs"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        filler, limit = small_disk / "filler", None
        if trial % 2 == 0:
            with open(filler, "wb") as f:
                f.write(b"\0" * max(0, shutil.disk_usage(small_disk).free - 4096 * rng.randrange(24)))
        else:
            limit = rng.randrange(48 * 1024)
        proc = subprocess.run([sys.executable, "-m", "dare.harness.cli", "--no-progress", *_args(out)],
                              capture_output=True, text=True, env={**os.environ, **plugin},
                              preexec_fn=_file_size_limit(limit) if limit is not None else None)
        line = _one_error_line(proc)
        assert line.startswith("dare-eval: error: ") and "rerun the same command to resume" in line, line
        assert "no space left to write " in line or "over this process's file-size limit" in line, line
        path = Path(line.split(" to write " if "no space" in line else "cannot write ", 1)[1].split(":")[0])
        where = path.parent.name if path.parent.parent.name == ".cache" else path.name  # a cache, or a file
        failed_at[where] = failed_at.get(where, 0) + 1
        for kind in ("generations", "verdicts"):
            for cache in (out / ".cache" / kind).glob("*.jsonl"):
                assert all(json.loads(x) for x in cache.read_text().splitlines()), (trial, cache)
        filler.unlink(missing_ok=True)
        rerun = dare_eval(*_args(out), env=plugin)
        assert rerun.returncode == 0, (trial, rerun.stderr)
        run_dir = Path(rerun.stdout.strip().splitlines()[-1])
        assert (run_dir / "samples.jsonl").read_bytes() == undisturbed, trial
        for kind in ("generations", "verdicts"):
            keys = jsonl_keys(out / ".cache" / kind)
            assert len(keys) == len(set(keys)) == TOTAL, (trial, kind)
    print(f"\n{TRIALS} trials; the write that failed, by file: {failed_at}")
    assert len(failed_at) >= 2  # the seeds reach more than one writer
