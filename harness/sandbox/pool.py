"""The worker pool: a fixed number of slots, each with its own uid, running one job at a time.

Threads in the parent only wait on pipes; all execution happens in sandboxed processes. Every job is a
fresh process tree that never held another job's data: forked by the slot's zygote into new namespaces
(``warm.py``; bubblewrap as root), or a new sandbox per job otherwise. Every job gets a random nonce that
each of its records must carry and ends with ``{"end": true}``; a malformed record, a wrong nonce, a
record after the end or a job still alive at its deadline is a protocol violation of *this* job, and it
retires the slot's sandbox. A slot is held for the whole job, so the per-slot uid (and with it
RLIMIT_NPROC) is never shared by two jobs at once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import queue
import secrets
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import SandboxError
from .codec import CodecError, loads
from .isolation import Isolation, Limits, cgroup2_memory, child_argv, detect, hidden_site_dirs
from .launcher import ChildResult, Clock, run_child
from .load import LoadGauge
from .warm import Zygote

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")
SETUP_FAILED = 121  # zygote.SETUP_FAILED: the job's confinement failed (that module runs only inside)
TRUSTED_UID_OFFSET = 500  # the trusted pool's slot uids start this far above the candidates'
NO_ISOLATION_FIX = ("no code-execution isolation is available here: install bubblewrap (apt-get install bubblewrap) "
                    "or util-linux's unshare, or pass --unsafe-local-exec (unsafe_local_exec=True in Python) to run "
                    "generated code unisolated")


def default_workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(32, cores))


@dataclasses.dataclass
class JobOutcome:
    """Parsed result records (plain JSON dicts, values still in wire form) and how the child ended."""

    records: list[dict]
    child: ChildResult
    protocol_error: str | None = None


class Sandbox:
    """Runs jobs of ``child_runner.py`` in isolated children over a pool of ``workers`` slots.

    ``isolation`` overrides detection (tests use it to exercise the no-namespace path for real). ``warm``:
    use per-slot zygotes where they are available (bubblewrap as root), else a new sandbox per job."""

    def __init__(self, workers: int | None = None, limits: Limits | None = None, unsafe_local_exec: bool = False,
                 uid_base: int = 61000, isolation: Isolation | None = None, warm: bool = True):
        self.limits = limits or Limits()
        self.workers = workers or default_workers()
        self.unsafe_local_exec = unsafe_local_exec
        self.isolation: Isolation = isolation or detect(uid_base)
        if self.isolation.uid_base != uid_base:
            self.isolation = dataclasses.replace(self.isolation, uid_base=uid_base)
        if self.isolation.backend == "none":
            if not unsafe_local_exec:
                raise SandboxError(NO_ISOLATION_FIX)
            log.warning("running generated code WITHOUT namespace isolation (unsafe_local_exec=True)")
        self.warm = warm and self.isolation.backend == "bwrap" and self.isolation.drop_uid
        self.report: dict | None = None  # the confinement as a job sees it (zygote self-test or a probe job)
        self.load = LoadGauge()  # the wall limits' rule, and the load the parent's deadlines stretch with
        self._zygotes: dict[int, Zygote] = {}
        self._slots: queue.Queue[int] = queue.Queue()
        for slot in range(self.workers):
            self._slots.put(slot)
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="dare-sandbox")

    def describe(self) -> dict[str, Any]:
        if self.report is None:
            self.run_job({"mode": "probe"}, 60)
        described = self.isolation.describe(self.limits, self.workers, self.unsafe_local_exec)
        described["warm_servers"] = self.warm
        layers = described["layers"]
        layers.append("one job, one fresh process tree: forked by a clean per-slot zygote into new pid/mount/"
                      "IPC/UTS namespaces, killed whole with its pid 1" if self.warm else "a new sandbox per sample")
        layers += ["a fresh channel per job: new pipes, a nonce on every record, an end record",
                   "expected outputs from a separate trusted pool"]
        if self.isolation.backend == "bwrap":
            layers.append(f"site-packages hidden: {len(hidden_site_dirs(self.isolation))} directories")
        report = self.report or {}
        layers.append(f"memory: RLIMIT_AS {self.limits.address_space >> 20} MiB per process, at most "
                      f"{self.limits.processes} processes; /tmp and /dev/shm tmpfs {self.limits.tmp_size >> 20} "
                      "MiB each per job; memfd_create and SysV shm denied; cgroup v2 memory.max not used ("
                      + ("available here" if cgroup2_memory() else "no cgroup v2 memory controller here") + ")")
        described["cgroup2_memory_controller"] = cgroup2_memory()
        described["job_confinement"] = {key: report.get(key) for key in (
            "uid", "cap_eff", "no_new_privs", "seccomp", "seccomp_mode", "session_keyring", "userns_creatable",
            "tmp", "shm", "fresh_ipc_ns", "error")}
        return described

    def trusted_twin(self) -> Sandbox:
        """A separate pool with the same limits for trusted jobs (reference runs that build test plans):
        its own uids and zygotes, so no candidate ever ran where expected outputs are computed."""
        return Sandbox(self.workers, self.limits, self.unsafe_local_exec, self.isolation.uid_base + TRUSTED_UID_OFFSET,
                       self.isolation, self.warm)

    def _zygote(self, slot: int) -> Zygote | None:
        if slot not in self._zygotes:
            argv = child_argv(self.isolation, self.limits, slot, zygote=True)
            zygote = Zygote(argv, self.limits.tmp_size, self.limits.stdout_cap, self.limits.stderr_cap)
            try:
                problem = confinement_problem(zygote.start(), self.isolation.uid_base + slot)
            except SandboxError as exc:
                problem = str(exc)[:300]
            report = zygote.report or {}
            if problem:
                zygote.stop()
                log.warning("sandbox zygote unusable (%s): a new sandbox per job instead", problem)
                self.warm = False
                return None
            self.report = self.report or report
            self._zygotes[slot] = zygote
        return self._zygotes[slot]

    def run_job(self, job: dict, deadline_s: float, on_record: Callable[[dict], bool] | None = None,
                steps: list[float] | None = None, stretch: Callable[[], float] | None = None) -> JobOutcome:
        """Run one job; ``on_record`` sees each parsed record and returns False to stop the job early.
        ``steps``: the parent's deadline per step (program load, then each test), and ``stretch`` the load
        factor that multiplies them, see ``launcher.Clock``."""
        nonce = secrets.token_hex(12)
        records: list[dict] = []
        problems: list[str] = []
        state = {"ended": False}
        clock = Clock(deadline_s, steps or (), stretch)  # restarted once the slot and its sandbox are ready

        def on_line(line: bytes) -> bool:
            try:
                record = loads(line)
            except CodecError as exc:
                problems.append(str(exc))
                return False
            if type(record) is not dict or record.pop("n", None) != nonce:
                problems.append("result record without this job's nonce")
                return False
            if state["ended"]:
                problems.append("result record after the end of the job")
                return False
            if record == {"end": True}:
                state["ended"] = True
                return True
            if record.get("probe") is True and job["mode"] == "probe":
                self.report = self.report or record
            records.append(record)
            keep_going = on_record(record) if on_record else True
            clock.advance()  # the next step starts after the parent has decided on this record
            return keep_going

        # own_pid_namespace: the job's /proc lists its own processes only (it counts their CPU as its own)
        payload = framed({**job, "nonce": nonce, "own_pid_namespace": self.isolation.backend != "none"})
        slot = self._slots.get()  # waiting for a slot, or for its sandbox to start, is not the job's time
        try:
            zygote = self._zygote(slot) if self.warm else None
            if zygote is not None:
                zygote.ensure_started()
                clock.restart()
                child = zygote.run(payload, clock, on_line)
                if child.returncode is None and not records and not child.timed_out and not problems:
                    zygote.ensure_started()  # the zygote died before the job began: once more
                    clock.restart()
                    child = zygote.run(payload, clock, on_line)
                if child.returncode == SETUP_FAILED and not records:  # before any payload byte: the machine's fault
                    zygote.stop()
                    raise SandboxError("the sandbox could not confine a job (namespaces, mounts or uid drop failed)")
            else:
                clock.restart()
                child = self._fresh(payload, clock, on_line, slot)
            if child.stdout_truncated:
                problems.append("result channel exceeded its byte cap")
            if child.timed_out and state["ended"]:
                problems.append("job still alive at its deadline after its end record")
            if problems and zygote is not None:
                zygote.stop()  # a protocol violation retires the whole slot sandbox
        finally:
            self._slots.put(slot)
        return JobOutcome(records, child, "; ".join(problems) or None)

    def _fresh(self, payload: bytes, clock: Clock, on_line, slot: int) -> ChildResult:
        argv = child_argv(self.isolation, self.limits, slot)
        caps = (self.limits.stdout_cap, self.limits.stderr_cap)
        if self.isolation.backend == "bwrap":
            return run_child(argv, payload, clock, on_line, *caps)
        with tempfile.TemporaryDirectory(prefix="dare-sbx-") as workdir:
            os.chmod(workdir, 0o777)
            return run_child(argv, payload, clock, on_line, *caps, cwd=workdir)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``[fn(x) for x in items]`` across the pool's threads, in order."""
        return list(self._executor.map(fn, items))

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for zygote in self._zygotes.values():
            zygote.stop()
        self._zygotes.clear()


def framed(job: dict) -> bytes:
    """The payload ``child_runner.run_payload`` reads: the head's length (12 digits), the head (the job but its
    inputs) and the inputs, which a call job's steward reads only once the candidate's process has started."""
    def text(part: dict) -> bytes:
        return json.dumps(part, separators=(",", ":"), allow_nan=False).encode()

    head = text({key: value for key, value in job.items() if key != "inputs"})
    tail = text({"inputs": job["inputs"]}) if "inputs" in job else b""
    return b"%012d" % len(head) + head + tail


def confinement_problem(report: dict, uid: int) -> str | None:
    """Why a zygote's self-test shows a job less confined than required, or None."""
    from .seccomp import supported

    checks = [(report.get("probe") is True, report.get("error") or "no probe report"),
              (report.get("uid") == uid, "job not running as the slot uid"),
              (report.get("cap_eff") == "0000000000000000", "job keeps capabilities"),
              (report.get("tmp") == "tmpfs" and report.get("shm") == "tmpfs", "no private /tmp and /dev/shm"),
              (report.get("ipc_ns") != report.get("zygote_ipc_ns"), "no fresh IPC namespace"),
              (not supported() or report.get("seccomp_mode") == "2", "no seccomp filter"),
              (not report.get("userns_creatable"), "user namespaces creatable")]
    report["fresh_ipc_ns"] = checks[4][0]
    return next((why for ok, why in checks if not ok), None)
