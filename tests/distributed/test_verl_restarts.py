"""A verl training worker killed mid-run: the worker group restarts from the last checkpoint by itself, and the
run ends with an undisturbed run's weights (bit for bit) and metrics (every field but the timings).

20 seeded trials (marked extended): each SIGKILLs one of the two ranks once or twice, at a seeded driver call
(rollout, log-probs, update, checkpoint gather) and a seeded delay into it, so kills land both between calls and
inside a collective. A restart budget of 0 keeps the old behaviour: one line, exit 1, and the rerun resumes."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest

pytest.importorskip("ray")
pytest.importorskip("verl")

import torch  # noqa: E402

from dare.backends.models.tiny import write_tiny_checkpoint  # noqa: E402
from dare.trainers.cli import main  # noqa: E402
from dare.trainers.verl import recovery  # noqa: E402
from dare.trainers.verl.trainer import VerlTrainer  # noqa: E402

from ..run_records import metric_rows, weights  # noqa: E402
from .vowels import vowel_benchmarks  # noqa: E402

pytestmark = pytest.mark.timeout(1500)
TRIALS = 20
STEPS = ["--steps", "3", "--no-eval", "--no-progress", "--engine", "verl", "--suite", "vowels", "--algo", "d1",
         "--set", "save_every=2", "--set", "prompts_per_step=2", "--set", "group_size=2", "--set", "micro_batch_size=1",
         "--set", "decoding.gen_length=8", "--set", "decoding.steps=8", "--set", "decoding.block_length=4",
         "--set", "lr=1e-2", "--set", "algo.inner_steps=2", "--set", "rollout.temperature=1.0",
         "--set", "lr_schedule=cosine"]  # every update its own lr: a restart must rewind the schedule too


class Killer:
    """Wraps ``VerlTrainer._call``: at the scheduled call numbers, SIGKILL one rank ``delay`` seconds into it."""

    def __init__(self, schedule: dict[int, tuple[int, float]]):
        self.schedule, self.calls, self.kills, self.original = schedule, 0, 0, VerlTrainer._call

    def __call__(self, trainer, stage, method, *args):
        plan = self.schedule.get(self.calls)
        self.calls += 1
        if plan is not None and method == "init_model":  # a restarted group: its pids are known once it is up
            out = self.original(trainer, stage, method, *args)
            self._kill(out[plan[0]]["pid"])
            return out
        if plan is not None:
            rank, delay = plan
            threading.Timer(delay, self._kill, (trainer.worker_info[rank]["pid"],)).start()
        return self.original(trainer, stage, method, *args)

    def _kill(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
            self.kills += 1
        except ProcessLookupError:  # its call failed first and the group was already replaced
            pass


@pytest.fixture(scope="module")
def undisturbed(ray_cluster, tmp_path_factory):
    """The reference run and the number of driver calls it makes; the vowel benchmark stays registered."""
    root = tmp_path_factory.mktemp("verl-restarts")
    with pytest.MonkeyPatch.context() as mp, vowel_benchmarks(root, mp):
        ckpt = write_tiny_checkpoint("llada", root / "llada", seed=5)
        counter = Killer({})
        mp.setattr(VerlTrainer, "_call", lambda self, *a: counter(self, *a))
        assert main(["--model-path", str(ckpt), "--out", str(root), "--run-name", "straight", *STEPS]) == 0
        mp.setattr(VerlTrainer, "_call", counter.original)
        run = root / "straight"
        yield ckpt, metric_rows(run), weights(run / "checkpoints" / "step-000003"), counter.calls


def _trial(ckpt, out, schedule, *more):
    killer = Killer(schedule)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(VerlTrainer, "_call", lambda self, *a: killer(self, *a))
        began = time.perf_counter()
        code = main(["--model-path", str(ckpt), "--out", str(out), "--run-name", "killed", *STEPS, *more])
    return code, killer, time.perf_counter() - began


def test_a_killed_worker_restarts_the_group_and_the_run_ends_as_if_undisturbed(undisturbed, tmp_path):
    ckpt, rows, expected, calls = undisturbed
    late = calls - 4  # step 3's update (then a memory report and 2 gathers): only step 3 runs again
    code, killer, _ = _trial(ckpt, tmp_path, {late: (1, 0.0)})
    run = tmp_path / "killed"
    assert code == 0 and killer.kills == 1
    assert metric_rows(run) == rows
    resumed = weights(run / "checkpoints" / "step-000003")
    assert all(torch.equal(resumed[k], expected[k]) for k in expected)
    [entry] = recovery.recorded(run)
    assert entry["restart"] == 1 and entry["resumed_from_step"] == 2 and entry["step_in_flight"] == 3
    assert entry["cause"].startswith("verl training worker 1 died (") and "during an update" in entry["cause"]


def test_with_no_restart_budget_a_death_stops_the_run_and_the_rerun_resumes(undisturbed, tmp_path, capsys):
    ckpt, rows, expected, calls = undisturbed
    code, killer, _ = _trial(ckpt, tmp_path, {calls - 4: (0, 0.0)}, "--worker-restarts", "0")
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dare-train: error")]
    assert code == 1 and killer.kills == 1 and len(err) == 1, err
    assert "verl training worker 0 died (" in err[0] and "MiB when it last answered" in err[0]
    assert "restart budget is spent (0 of 0, --worker-restarts)" in err[0] and "rerun the same command" in err[0]
    run = tmp_path / "killed"
    assert [r["step"] for r in metric_rows(run)] == [1, 2]  # step 3's row was never written
    code, _, _ = _trial(ckpt, tmp_path, {})
    assert code == 0 and metric_rows(run) == rows
    final = weights(run / "checkpoints" / "step-000003")
    assert all(torch.equal(final[k], expected[k]) for k in expected)


@pytest.mark.extended
def test_seeded_kill_trials(undisturbed, tmp_path):
    ckpt, rows, expected, calls = undisturbed
    seconds, restarts = [], 0
    for trial in range(TRIALS):
        rng = random.Random(trial)
        # call 0 starts the first group (a death there stops the run before any work); the last two gather the
        # final checkpoint (a kill landing after them would find the group already stopped). A delay lands the
        # kill inside a call or between two; from step 3's update on, only at once. Calls of a restarted group
        # are numbered on, so a second kill may hit the new group just after it started.
        at = sorted(rng.sample(range(1, calls - 2), 1 + (rng.random() < 0.3)))
        schedule = {n: (rng.randrange(2), rng.choice([0.0, rng.uniform(0.0, 0.4)]) if n < calls - 5 else 0.0)
                    for n in at}
        out = tmp_path / str(trial)
        code, killer, took = _trial(ckpt, out, schedule)
        run = out / "killed"
        assert code == 0, (trial, schedule)
        assert metric_rows(run) == rows, (trial, schedule)
        final = weights(run / "checkpoints" / "step-000003")
        assert all(torch.equal(final[k], expected[k]) for k in expected), (trial, schedule)
        # two kills may land on one group (the second before the first's failure was seen): one restart
        assert 1 <= len(recovery.recorded(run)) <= killer.kills, (trial, schedule, killer.kills)
        seconds.append(took)
        restarts += len(recovery.recorded(run))
    print(f"\n{TRIALS} trials, {restarts} restarts, {min(seconds):.1f}-{max(seconds):.1f} s a trial")
