"""A machine lost mid-run: a two-node Ray cluster on this machine (a head and a second node, each with its own raylet;
Ray's ``cluster_utils.Cluster`` starts the processes ``ray start --head`` and ``ray start --address`` would),
attached to as a user would (RAY_ADDRESS). Every process of the second node is SIGKILLed mid-run.

* Evaluation (one CPU a node, so dare-eval --workers 2 puts one worker on each): the lost worker's replacement has
  nowhere to go, so the head's worker takes the lost shard and the rest; samples.jsonl is the undisturbed run's.
* Training (dare-train --engine verl --nnodes 2 --gpus-per-node 1, a head with room for both ranks): the group
  starts spread over the two nodes, the second node is lost in step 3's update, and the group restarts on the head
  from the step-2 checkpoint; weights and metrics are the undisturbed run's."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import threading
import time

import pytest
import torch

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

from ray.cluster_utils import Cluster  # noqa: E402

from dare.harness import cli  # noqa: E402

from .test_worker_restarts import ARGS, BATCHES, TRIALS, KillSchedule, once_each, run_dir  # noqa: E402

pytestmark = pytest.mark.timeout(900)
# Ray declares a node dead after missed health checks (about 15 s by default); faster here, so the test is short
HEALTH_CHECKS = {"health_check_period_ms": 500, "health_check_failure_threshold": 4, "health_check_timeout_ms": 500}


@pytest.fixture
def two_nodes(monkeypatch, request):
    """Head and second node, one CPU each (``head_cpus`` by indirect parametrisation)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():
        ray.shutdown()
    head_cpus = getattr(request, "param", 1)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": head_cpus, "include_dashboard": False,
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


def lose(cluster, node, pids: list[int]) -> None:
    """The machine is gone: its raylet and other processes (``remove_node``) and its workers, all at once (a
    worker whose raylet died would otherwise keep answering the driver directly until it noticed)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    cluster.remove_node(node, allow_graceful=False)


def marked_dead(node, timeout_s: float = 30.0) -> None:
    """Wait until Ray has declared ``node`` dead (missed health checks: about 2 s here)."""
    deadline = time.monotonic() + timeout_s
    while any(n["NodeID"] == node.node_id and n["Alive"] for n in ray.nodes()):
        assert time.monotonic() < deadline, f"node {node.node_id} still alive {timeout_s:g} s after it was lost"
        time.sleep(0.2)


class LoseNode(KillSchedule):
    """At progress point ``point`` (0: before batch 1; p: batch p cached), SIGKILL every process of ``node``, at
    once or ``delay`` seconds later from a thread (so the loss lands while the next batch decodes)."""

    def __init__(self, cluster, node, point: int, delay: float):
        super().__init__({})
        self.cluster, self.node, self.at, self.delay = cluster, node, point, delay
        self.lost: list[int] = []

    def _at(self, point: int) -> None:
        if point != self.at:
            return
        self.lost = on_node(self.node, self.engine.worker_pids())
        if self.delay == 0:
            self._lose(delayed=False)
            return
        thread = threading.Thread(target=lambda: (time.sleep(self.delay), self._lose(delayed=True)))
        thread.start()
        self.threads.append(thread)

    def _lose(self, delayed: bool) -> None:
        lose(self.cluster, self.node, self.lost)
        self.landed.append((self.point, delayed))


@pytest.mark.extended
def test_seeded_node_losses_leave_the_run_to_finish_on_the_head(two_nodes, tmp_path, monkeypatch):
    """20 seeded trials: a fresh second node each, lost before batch 1 or after a cached batch, at once or a
    seeded moment into the next batch; every run finishes on the head with the undisturbed samples.jsonl."""
    cluster, second = two_nodes
    undisturbed = tmp_path / "undisturbed"
    assert cli.main([*ARGS, "--out", str(undisturbed), "--no-progress"]) == 0
    expected = (run_dir(undisturbed) / "samples.jsonl").read_bytes()
    seconds = []
    for trial in range(TRIALS):
        rng = random.Random(trial)
        if trial:  # the previous trial's node is gone: a new machine joins
            second = cluster.add_node(num_cpus=1, include_dashboard=False)
            cluster.wait_for_nodes()
        point = rng.randrange(BATCHES)
        delay = rng.choice([0.0, rng.uniform(0.05, 0.5)]) if point < BATCHES - 1 else 0.0
        losing = LoseNode(cluster, second, point, delay)
        monkeypatch.setattr(cli, "progress_bars", lambda enabled, losing=losing: losing.bar)
        out = tmp_path / f"trial{trial}"
        began = time.monotonic()
        assert cli.main([*ARGS, "--out", str(out)]) == 0, (trial, point, delay)
        seconds.append(time.monotonic() - began)
        assert len(losing.lost) == 1, (trial, point)  # one of the two workers ran on the node that was lost
        assert (run_dir(out) / "samples.jsonl").read_bytes() == expected, (trial, point, delay)
        once_each(out)
        record = json.loads((run_dir(out) / "run.json").read_text())
        assert record["status"] == "complete", (trial, point)
        assert record["execution"]["worker_restarts"] in losing.restarts(), (trial, point, delay, losing.landed)
        marked_dead(second)  # the run went on with the head alone; no later run may be placed on the lost node
    print(f"\n{TRIALS} node losses, {min(seconds):.1f}-{max(seconds):.1f} s a run")


class Holder:
    def ready(self) -> bool:
        return True


class Spread:
    """Around dare-train --engine verl: holds one head CPU while a group is placed, so its two ranks land on the
    two nodes; at driver call ``lose_at`` (not counting start-ups) the second node is lost, ``delay`` seconds into
    the call, leaving the head room for the whole restarted group."""

    def __init__(self, cluster, node, lose_at: int | None, delay: float = 0.0):
        from dare.trainers.verl import trainer as trainer_module

        self.cluster, self.node, self.lose_at, self.delay = cluster, node, lose_at, delay
        self.calls, self.placed, self.lost = 0, [], []
        self.call, self.start = trainer_module.VerlTrainer._call, trainer_module.start_worker_group

    def patch(self, monkeypatch) -> None:
        from dare.trainers.verl import trainer as trainer_module

        monkeypatch.setattr(trainer_module.VerlTrainer, "_call", lambda trainer, *a: self.on_call(trainer, *a))
        monkeypatch.setattr(trainer_module, "start_worker_group", lambda *a: self.start_group(*a))

    def start_group(self, placement, kwargs):
        if self.lost:
            return self.start(placement, kwargs)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        head = self.cluster.head_node.node_id
        hold = ray.remote(num_cpus=1)(Holder).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False)).remote()
        ray.get(hold.ready.remote())
        try:
            group = self.start(placement, kwargs)
            self.placed.append(on_node(self.node, [info["pid"] for info in group.rank_info()]))
        finally:
            ray.kill(hold)
        return group

    def on_call(self, trainer, stage, method, *args):
        if method not in ("init_model", "load_optimizer_state"):
            self.calls += 1
        if self.calls == self.lose_at and not self.lost:
            self.lost.append(on_node(self.node, [info["pid"] for info in trainer.worker_info]))
            threading.Timer(self.delay, lose, (self.cluster, self.node, self.lost[0])).start()
        return self.call(trainer, stage, method, *args)


def _train(monkeypatch, spread: Spread, common: list[str], name: str) -> None:
    from dare.trainers.cli import main

    with monkeypatch.context() as mp:
        spread.patch(mp)
        assert main([*common, "--run-name", name]) == 0


@pytest.fixture
def training(two_nodes, tmp_path, monkeypatch):
    """The cluster attached, the vowel benchmark registered, and the undisturbed run on two nodes."""
    from dare.backends.models.tiny import write_tiny_checkpoint

    from .test_verl_restarts import STEPS
    from .vowels import vowel_benchmarks

    cluster, second = two_nodes
    ray.init(address=cluster.address)
    ckpt = write_tiny_checkpoint("llada", tmp_path / "llada", seed=5)
    common = ["--model-path", str(ckpt), "--out", str(tmp_path), *STEPS, "--nnodes", "2", "--gpus-per-node", "1"]
    with vowel_benchmarks(tmp_path, monkeypatch):
        straight = Spread(cluster, second, None)
        _train(monkeypatch, straight, common, "straight")
        assert [len(p) for p in straight.placed] == [1]  # one rank on the second node
        yield cluster, second, common


def _same_as_undisturbed(tmp_path, name: str) -> None:
    from dare.trainers.verl import recovery

    from ..run_records import metric_rows, weights

    assert metric_rows(tmp_path / name) == metric_rows(tmp_path / "straight")
    final, straight = (weights(tmp_path / run / "checkpoints" / "step-000003") for run in (name, "straight"))
    assert all(torch.equal(final[k], straight[k]) for k in straight)
    assert len(recovery.recorded(tmp_path / name)) == 1


@pytest.mark.extended
@pytest.mark.parametrize("two_nodes", [2], indirect=True)
def test_a_lost_node_mid_training_restarts_the_group_on_the_head(training, tmp_path, monkeypatch):
    from dare.trainers.verl import recovery

    cluster, second, common = training
    # 5 calls a step (rollout, old and reference log-probs, update, memory report), 2 to gather the step-2
    # checkpoint: the 16th is step 3's update
    spread = Spread(cluster, second, 16)
    _train(monkeypatch, spread, common, "lost")
    assert [len(p) for p in spread.placed] == [1] and [len(p) for p in spread.lost] == [1]
    _same_as_undisturbed(tmp_path, "lost")
    marked_dead(second)
    [entry] = recovery.recorded(tmp_path / "lost")
    assert entry["resumed_from_step"] == 2 and entry["step_in_flight"] == 3


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("two_nodes", [2], indirect=True)
def test_seeded_node_losses_mid_training(training, tmp_path, monkeypatch):
    """20 seeded trials: a fresh second node each, lost at a seeded driver call of the first group (rollout,
    log-probs, update, memory report, checkpoint gather), at once or a seeded moment into it."""
    cluster, second, common = training
    seconds = []
    for trial in range(TRIALS):
        rng = random.Random(trial)
        if trial:
            second = cluster.add_node(num_cpus=1, include_dashboard=False)
            cluster.wait_for_nodes()
        lose_at = rng.randrange(1, 17)
        spread = Spread(cluster, second, lose_at, rng.choice([0.0, rng.uniform(0.0, 0.3)]) if lose_at < 15 else 0.0)
        began = time.monotonic()
        _train(monkeypatch, spread, common, f"lost{trial}")
        seconds.append(time.monotonic() - began)
        assert [len(p) for p in spread.lost] == [1], (trial, lose_at)
        _same_as_undisturbed(tmp_path, f"lost{trial}")
        marked_dead(second)
    print(f"\n{TRIALS} node losses mid-training, {min(seconds):.1f}-{max(seconds):.1f} s a run")
