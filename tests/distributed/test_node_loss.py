"""A machine lost mid-run: a two-node Ray cluster on this machine (a head and a second node, each with its own raylet
and one CPU, so dare-eval --workers 2 puts one worker on each; Ray's ``cluster_utils.Cluster`` starts the processes
``ray start --head`` and ``ray start --address`` would), attached to as a user would (RAY_ADDRESS). Every
process of the second node is SIGKILLed after the first batch is cached; its worker's replacement has nowhere to
go, so the head's worker takes the lost shard and the rest, and samples.jsonl is the undisturbed run's."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

from ray.cluster_utils import Cluster  # noqa: E402

from dare.harness import cli  # noqa: E402

from .test_worker_restarts import ARGS, KillSchedule, once_each, run_dir  # noqa: E402

pytestmark = [pytest.mark.extended, pytest.mark.timeout(600)]
# Ray declares a node dead after missed health checks (about 15 s by default); faster here, so the test is short
HEALTH_CHECKS = {"health_check_period_ms": 500, "health_check_failure_threshold": 4, "health_check_timeout_ms": 500}


@pytest.fixture
def two_nodes(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                            "_system_config": HEALTH_CHECKS})
    try:
        second = cluster.add_node(num_cpus=1, include_dashboard=False)
        cluster.wait_for_nodes()
        monkeypatch.setenv("RAY_ADDRESS", cluster.address)  # ParallelEngine attaches instead of starting one
        yield cluster, second
    finally:
        ray.shutdown()
        cluster.shutdown()


def on_node(node, pids: list[int]) -> list[int]:
    """The pids that run under ``node``'s raylet (its workers are the raylet's children)."""
    raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
    mine = {p.pid for p in raylet.children(recursive=True)}
    return [p for p in pids if p in mine]


class LoseNodeAfterBatch(KillSchedule):
    def __init__(self, cluster, node):
        super().__init__({})
        self.cluster, self.node = cluster, node
        self.lost: list[int] = []

    def update(self, n: int) -> None:
        self.point += 1
        if self.point == 1:
            self.lost = on_node(self.node, self.engine.worker_pids())
            self.cluster.remove_node(self.node, allow_graceful=False)  # SIGKILL to every process of the node


def test_a_lost_node_leaves_the_run_to_finish_on_the_head(two_nodes, tmp_path, monkeypatch):
    cluster, second = two_nodes
    undisturbed = tmp_path / "undisturbed"
    assert cli.main([*ARGS, "--out", str(undisturbed), "--no-progress"]) == 0

    losing = LoseNodeAfterBatch(cluster, second)
    monkeypatch.setattr(cli, "progress_bars", lambda enabled: losing.bar)
    out = tmp_path / "lost"
    assert cli.main([*ARGS, "--out", str(out)]) == 0
    assert len(losing.lost) == 1  # one of the two workers ran on the node that was lost
    assert (run_dir(out) / "samples.jsonl").read_bytes() == (run_dir(undisturbed) / "samples.jsonl").read_bytes()
    once_each(out)
    record = json.loads((run_dir(out) / "run.json").read_text())
    assert record["status"] == "complete" and record["execution"]["worker_restarts"] == 1
    assert [n["Alive"] for n in ray.nodes()].count(True) == 1  # the run went on with the head alone
