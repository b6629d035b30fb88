"""The worker pool once a stop was asked for: a scheduler's SIGTERM to the whole job (Slurm's cgroup tracking)
ends the Ray workers too, so a worker that dies then is not replaced on a cluster that is going down; the run
stops at once (exit 75, the work in flight dropped), long before its grace period runs out."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

pytest.importorskip("ray")

from dare.harness import stopping  # noqa: E402
from dare.harness.errors import Stopped  # noqa: E402
from dare.harness.oom import MemoryReport  # noqa: E402
from dare.harness.worker_pool import WorkerPool  # noqa: E402

GRACE_S = 30.0


class Sleeper:
    """An actor whose jobs sleep; once ``slow_start`` exists, a new one takes a minute to come up."""

    def __init__(self, slow_start: str):
        self.slow_start = slow_start

    def ready(self) -> MemoryReport:
        if os.path.exists(self.slow_start):
            time.sleep(60)
        return MemoryReport.now()

    def call(self, method: str, seconds: float) -> tuple[int, MemoryReport]:
        time.sleep(seconds)
        return os.getpid(), MemoryReport.now()


@pytest.fixture
def pool(ray_cluster, tmp_path):
    actor = ray_cluster.remote(Sleeper).options(num_cpus=0, max_restarts=0)
    pool = WorkerPool(lambda: actor.remote(str(tmp_path / "slow-start")), 2, restart_budget=3)
    handlers = {s: signal.getsignal(s) for s in stopping.SIGNALS}
    try:
        yield pool
    finally:
        pool.close()
        for s, handler in handlers.items():  # graceful() leaves a stopped tool ignoring late signals
            signal.signal(s, handler)


def _kill_later(pid: int, delay_s: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay_s), os.kill(pid, signal.SIGKILL)))
    thread.start()
    return thread


def test_without_a_stop_the_dead_worker_is_replaced_and_its_job_runs_again(pool):
    victim = pool.pids()[1]
    killing = _kill_later(victim, 0.5)
    answers = pool.run([("sleep", (2.0,)), ("sleep", (2.0,))])
    killing.join()
    assert pool.restarts == 1 and victim not in answers and len(answers) == 2


def test_a_worker_that_dies_once_a_stop_was_asked_for_stops_the_run_without_a_replacement(pool):
    victim = pool.pids()[1]
    began = time.monotonic()
    with stopping.graceful(GRACE_S):
        os.kill(os.getpid(), signal.SIGTERM)  # the driver's share of the job's SIGTERM
        killing = _kill_later(victim, 0.5)  # the worker's share: it ends while its job runs
        with pytest.raises(Stopped, match=r"evaluation worker 1 of 2 died .*so its work in flight was dropped"):
            pool.run([("sleep", (2.0,)), ("sleep", (2.0,))])
        killing.join()
    assert pool.restarts == 0 and time.monotonic() - began < GRACE_S / 2


def test_a_stop_while_no_worker_is_up_drops_the_work_in_flight(pool, tmp_path):
    """Both workers died before the stop and their replacements are slow to start (a new Ray worker imports
    torch and loads the model): with no job running, the pool stops rather than wait for them."""
    (tmp_path / "slow-start").touch()
    for pid in pool.pids():
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    with stopping.graceful(GRACE_S):
        signalling = threading.Thread(target=lambda: (time.sleep(1.0), os.kill(os.getpid(), signal.SIGTERM)))
        signalling.start()
        began = time.monotonic()
        with pytest.raises(Stopped, match=r"no evaluation worker of 2 was up to finish the work in flight"):
            pool.run([("sleep", (0.1,)), ("sleep", (0.1,))])
        signalling.join()
    assert pool.restarts == 2 and time.monotonic() - began < GRACE_S / 2
