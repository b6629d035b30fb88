"""`dare-train --compare --jobs N` children: they die with a killed parent, and their errors reach it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from dare.trainers.experiments.compare import last_error

from ..stops import default_signals

pytestmark = pytest.mark.extended  # real parent and child processes, seconds each: run with -m extended

CHILD = "import os, time; print(os.getpid(), flush=True); time.sleep(120)"
PARENT = ("import sys; from pathlib import Path; from dare.trainers.experiments.compare import run_child; "
          "run_child([sys.executable, '-c', sys.argv[2]], {}, Path(sys.argv[1]))")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_parent_takes_its_children_along(tmp_path):
    log = tmp_path / "child.log"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(log), CHILD])
    deadline = time.monotonic() + 60
    while not (log.is_file() and log.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(log.read_text().split()[0])
    try:
        os.kill(parent.pid, signal.SIGKILL)  # kill -9: no handler of the parent runs
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its killed parent"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


INTERRUPTED_PARENT = ("import sys; from pathlib import Path; "
                      "from dare.trainers.experiments.compare import run_children; "
                      "d = Path(sys.argv[1]); child = [sys.executable, '-c', sys.argv[2]]; "
                      "run_children([(child, d / f'{n}.log') for n in 'abc'], {}, 2)")


def test_an_interrupted_parent_stops_its_children_and_starts_no_more(tmp_path):
    """SIGINT to the parent alone (as `kill -INT` sends it): without passing it on, the pool would wait for
    both children's whole training (here 120 s) and then start the third job."""
    parent = subprocess.Popen([sys.executable, "-c", INTERRUPTED_PARENT, str(tmp_path), CHILD],
                              preexec_fn=default_signals)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    deadline = time.monotonic() + 60
    while not all(f.is_file() and f.read_text().strip() for f in logs) and time.monotonic() < deadline:
        time.sleep(0.05)
    children = [int(f.read_text().split()[0]) for f in logs]
    try:
        os.kill(parent.pid, signal.SIGINT)
        assert parent.wait(timeout=30) != 0
        assert not any(_alive(c) for c in children), "a child outlived its interrupted parent"
        assert "KeyboardInterrupt" in logs[0].read_text()  # stopped by the interrupt, not by SIGTERM
        assert not (tmp_path / "c.log").exists(), "a queued job started after the interrupt"
    finally:
        for c in children:
            if _alive(c):
                os.kill(c, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()


def test_the_childs_own_error_line_is_read_back(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("dare-train: step 1/2  loss 0.1\ndare-train: error: runs/a is being trained by another process; "
                   "wait for it to finish\n")
    assert last_error(log) == "runs/a is being trained by another process; wait for it to finish"
    assert last_error(tmp_path / "absent.log") is None


def test_a_failed_childs_error_reaches_the_parents_message(tmp_path):
    """Two real `dare-train --compare` children that fail at once: the parent's one-line error quotes them."""
    import pytest

    from dare.harness.errors import DareError
    from dare.trainers.experiments.compare import ComparisonRunner

    runner = object.__new__(ComparisonRunner)  # only _parallel runs: no start model is trained
    runner.out = tmp_path / "out"
    runner.comparison = SimpleNamespace(threads=1)  # the one field _parallel reads
    with pytest.raises(DareError) as err:
        runner._parallel(["a", "b"], 2, str(tmp_path / "no-such-comparison.yaml"))
    text = str(err.value)
    assert (text.startswith("runs ['a', 'b'] failed (a: no comparison config")
            and "; b: no comparison config" in text), text
    assert "\n" not in text
