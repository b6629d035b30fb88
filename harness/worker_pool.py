"""A fixed number of Ray actors that runs jobs on whichever has started, replacing the ones that die.

:class:`WorkerPool` runs jobs (a method name and its arguments, sent to the actor's ``call``) on replicas of one
actor class. A job whose replica dies (SIGKILL, the OOM killer, a lost node: Ray reports the actor, its worker or
its node dead, or the result lost with the node) goes back to the front of the queue and runs on the next free
replica, and the dead replica's slot gets a new actor, counted against ``restart_budget``. Jobs are pure
functions of their arguments (an engine's requests carry their own seeds), so a job run again gives the same
answer, and each job's answer is returned once, in job order. One more death than the budget allows, or no
replica up and none starting within :data:`START_TIMEOUT_S`, raises :class:`WorkerDiedError` (one line); what the
caller finished before is its own to keep.

Jobs go only to replicas that have started: a replacement that cannot be placed (its node is gone and the rest
of the cluster is full) never holds a job, and the live replicas take its share until it comes up.

Once a stop was asked for (:mod:`.stopping`), nothing is replaced: a scheduler's SIGTERM to the whole job ends
the workers too, and a replacement on a cluster that is going down might never start. A death then, or no job
running while only replacements are starting, raises :class:`~dare.harness.errors.Stopped` with the work in
flight dropped; everything finished is already the caller's.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from . import stopping
from .errors import DareError
from .oom import MemoryReport, death_cause

log = logging.getLogger(__name__)

START_TIMEOUT_S = 300.0
"""How long a pool with no live replica waits for one to start (a new Ray worker imports torch; a GPU must free)."""
POLL_S = 1.0
"""Waits return to Python this often, so a SIGTERM's handler runs while the replicas work."""
RESUME = "finished batches are cached, rerun the same command to resume"


class WorkerDiedError(DareError):
    """A worker process died (killed, out of memory, crashed) and the run cannot go on without it: past the
    restart budget, or no replacement started (the verl trainer's workers, which are not replaced, too)."""

    exit_code = 1


def ray_deaths(ray) -> tuple[type[BaseException], ...]:
    """The Ray errors that mean a worker is gone: the actor, its worker process or its node died, or a result
    was lost with the node."""
    ex = ray.exceptions
    return ex.RayActorError, ex.WorkerCrashedError, ex.NodeDiedError, ex.ObjectLostError


def cluster_view(ray) -> str:
    """What Ray says of the cluster, for a replica that does not start: its nodes alive, and its CPUs and GPUs
    free (a full cluster, or none left, is the user's to fix)."""
    try:
        nodes = ray.nodes()
        total, free = ray.cluster_resources(), ray.available_resources()
    except Exception as exc:  # the cluster itself may be what is gone
        return f"Ray could not say why: {type(exc).__name__}"
    alive = sum(bool(n.get("Alive")) for n in nodes)
    room = [f"{free.get(r, 0):g} of {total[r]:g} {r}s free" for r in ("CPU", "GPU") if total.get(r)]
    return ", ".join([f"Ray sees {alive} of {len(nodes)} nodes alive", *room])


@dataclass
class _Slot:
    """One replica's place in the pool: its current actor, and the actor's pid once it has started."""

    index: int
    actor: Any
    started: Any
    """The ``ready()`` call's ObjectRef: it resolves to a MemoryReport when the actor is up and warmed up."""
    pid: int | None = None
    memory: MemoryReport | None = None
    """What the actor said of its memory with its last answer (for naming its death)."""


class WorkerPool:
    """``size`` actors made by ``new_actor()``, each with ``ready(*warm_up)`` (returns a :class:`MemoryReport`,
    its pid among it, once it has run ``warm_up``, a method and its arguments, if given) and ``call(method,
    *args)`` (returns the answer and a MemoryReport); the constructor returns once all have started. A
    replacement runs :attr:`warm_up` before it takes a job."""

    def __init__(self, new_actor: Callable[[], Any], size: int, restart_budget: int, what: str = "evaluation worker"):
        import ray

        self._ray, self._new_actor = ray, new_actor
        self.size, self.restart_budget, self.what = size, restart_budget, what
        self.restarts = 0
        self.warm_up: tuple = ()
        self._deaths = ray_deaths(ray)
        self._slots = [self._start(i) for i in range(size)]
        try:
            while any(s.pid is None for s in self._slots):
                self._next([])
        except BaseException:  # no pool to close later: the actors that did start must not hold their CPUs
            self.close()
            raise

    def pids(self) -> list[int]:
        """The pids of the replicas that are up, in slot order."""
        return [s.pid for s in self._slots if s.pid is not None]

    def live(self) -> int:
        return sum(s.pid is not None for s in self._slots)

    def run(self, jobs: list[tuple[str, tuple]]) -> list[Any]:
        """Each job's answer, in job order; a job whose replica died runs again on another."""
        answers: list[Any] = [None] * len(jobs)
        queue = deque(range(len(jobs)))
        running: dict[Any, tuple[_Slot, int]] = {}
        idle = [s for s in self._slots if s.pid is not None]
        while queue or running:
            while queue and idle:
                slot, job = idle.pop(0), queue.popleft()
                method, args = jobs[job]
                running[slot.actor.call.remote(method, *args)] = (slot, job)
            done, started = self._next(list(running))
            if started is not None:
                idle.append(started)
                continue
            slot, job = running.pop(done)
            try:
                answers[job], slot.memory = self._get(done)
            except self._deaths as exc:
                queue.appendleft(job)  # first in line, so the batch's order of work is kept
                self._replace(slot, exc)
                continue
            idle.append(slot)
        return answers

    def close(self) -> None:
        """End every actor now (a killed run's replicas would otherwise hold their CPUs or GPUs until collected)."""
        for slot in self._slots:
            with suppress(Exception):
                self._ray.kill(slot.actor, no_restart=True)

    def _start(self, index: int) -> _Slot:
        actor = self._new_actor()
        return _Slot(index, actor, actor.ready.remote(*self.warm_up))

    def _next(self, running: list) -> tuple[Any, _Slot | None]:
        """The next finished job's ref, or ``(None, slot)`` for a replica that has just started."""
        while True:
            starting = {s.started: s for s in self._slots if s.pid is None}
            deadline = None if running else time.monotonic() + START_TIMEOUT_S
            ready: list = []
            while not ready:
                if not running and stopping.requested():  # a replacement may never start on a job being ended
                    raise stopping.dropped(f"no {self.what} of {self.size} was up to finish the work in flight, "
                                           "so it was dropped")
                ready, _ = self._ray.wait(running + list(starting), num_returns=1, timeout=POLL_S)
                if not ready and deadline is not None and time.monotonic() > deadline:
                    raise WorkerDiedError(f"{self._not_started()} within {START_TIMEOUT_S:g} s "
                                          f"({cluster_view(self._ray)}); {RESUME}")
            if ready[0] not in starting:
                return ready[0], None
            slot = starting[ready[0]]
            try:
                slot.memory = self._get(slot.started)
                slot.pid = slot.memory.pid
            except self._deaths as exc:  # died while starting: it counts as a death like any other
                self._replace(slot, exc)
                continue
            log.info("%s %d of %d is up (pid %d)", self.what, slot.index, self.size, slot.pid)
            return None, slot

    def _not_started(self) -> str:
        if live := self.live():  # the constructor waits for every replica
            return f"only {live} of {self.size} {self.what}s started; the others did not"
        return f"no {self.what} of {self.size} was up and none started"

    def _replace(self, slot: _Slot, exc: Exception) -> None:
        why = death_cause(slot.memory, exc)
        if stopping.requested():  # a scheduler's SIGTERM to the whole job ends the workers too: no replacement
            raise stopping.dropped(f"{self.what} {slot.index} of {self.size} {why}, so its work in flight was "
                                   "dropped")
        if self.restarts >= self.restart_budget:
            raise WorkerDiedError(f"{self.what} {slot.index} of {self.size} {why}; the restart budget is spent "
                                  f"({self.restarts} of {self.restart_budget}, --worker-restarts); {RESUME}")
        self.restarts += 1
        log.warning("%s %d of %d %s; replacing it (restart %d of %d) and running its unfinished work again",
                    self.what, slot.index, self.size, why, self.restarts, self.restart_budget)
        with suppress(Exception):  # reported dead but perhaps only unreachable: never leave a second copy running
            self._ray.kill(slot.actor, no_restart=True)
        new = self._start(slot.index)
        slot.actor, slot.started, slot.pid, slot.memory = new.actor, new.started, None, None

    def _get(self, ref: Any) -> Any:
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)  # the engine's own exception, e.g. a one-line DareError
            if isinstance(cause, DareError):
                raise cause from None
            raise
