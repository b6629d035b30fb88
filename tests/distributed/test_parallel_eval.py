"""dare-eval --workers N: Ray engine replicas give the same run as one process; with no restarts allowed
(--worker-restarts 0) a killed worker stops the run in one line and a rerun resumes."""

from __future__ import annotations

import gc
import json
import os
import signal
from pathlib import Path

import pytest

pytest.importorskip("ray")

from dare.harness import cli, parallel  # noqa: E402

pytestmark = pytest.mark.timeout(240)
BASE = ["--model", "tiny-llada", "--suite", "sudoku", "--limit", "8", "--no-progress"]


def _run(out: Path, *extra: str) -> Path:
    assert cli.main([*BASE, "--out", str(out), *extra]) == 0
    return next(p for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))


def _same_run(a: Path, b: Path) -> None:
    assert (a / "samples.jsonl").read_text() == (b / "samples.jsonl").read_text()
    ra, rb = (json.loads((d / "run.json").read_text()) for d in (a, b))
    for key in ("status", "metrics", "model", "backend", "benchmarks"):
        assert ra[key] == rb[key], key
    # batch_size is execution only (excluded from config_hash); the killed-worker test uses smaller batches
    assert {k: v for k, v in ra["decoding"].items() if k != "batch_size"} == \
        {k: v for k, v in rb["decoding"].items() if k != "batch_size"}


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Path:
    return _run(tmp_path_factory.mktemp("one"), "--workers", "1")


def test_two_workers_equal_one_sample_for_sample(ray_cluster, single, tmp_path):
    two = _run(tmp_path, "--workers", "2")
    _same_run(single, two)
    record = json.loads((two / "run.json").read_text())
    assert record["counts"]["sudoku"]["generated"] == 8 and record["status"] == "complete"
    assert len((two / "samples.jsonl").read_text().splitlines()) == 8


def test_killed_worker_with_no_restarts_left_stops_and_rerun_resumes(ray_cluster, single, tmp_path, monkeypatch,
                                                                      capfd):
    killed: list[int] = []

    class KillAfterFirstBatch:  # a progress bar whose first update SIGKILLs worker 1 of the pool
        def update(self, n):
            engines = [o for o in gc.get_objects() if type(o) is parallel.ParallelEngine]
            if engines and not killed:
                killed.append(engines[-1].worker_pids()[1])
                os.kill(killed[0], signal.SIGKILL)

        def close(self):
            pass

    monkeypatch.setattr(cli, "progress_bars", lambda enabled: lambda desc, total: KillAfterFirstBatch())
    args = [*BASE, "--out", str(tmp_path), "--workers", "2", "--set", "batch_size=2", "--worker-restarts", "0"]
    args.remove("--no-progress")
    assert cli.main(args) == 1
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "evaluation worker" in err[0] and "died" in err[0] and "rerun" in err[0], err
    partial = next(p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert json.loads((partial / "run.json").read_text())["status"] == "partial"

    monkeypatch.setattr(cli, "progress_bars", lambda enabled: None)
    assert cli.main(args) == 0
    resumed = max((p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")),
                  key=lambda p: p.stat().st_mtime)
    counts = json.loads((resumed / "run.json").read_text())["counts"]["sudoku"]
    assert counts["cached"] == 2 and counts["generated"] == 6
    _same_run(single, resumed)


def test_shards_are_contiguous_and_balanced():
    shards = parallel._contiguous_shards(list(range(7)), 3)
    assert shards == [[0, 1, 2], [3, 4], [5, 6]]
    assert parallel._contiguous_shards([1], 2) == [[1], []]
