"""The code verifier (HumanEval, HumanEval+, MBPP, MBPP+): runs completions in the sandbox, decides in the parent.

The candidate's program runs in an isolated child that only receives the test inputs and only emits
its outputs as plain data; this parent compares them with expected outputs taken from a trusted test
plan (``dare.harness.sandbox.plans``), so nothing the candidate does inside can reach the verdict.
Tests whose asserts are not plain comparisons are re-run in a separate judge process that replays the
candidate's outputs: no assert ever runs in the candidate's interpreter.

Status taxonomy: whatever the candidate can cause (text that cannot be built into a program, output that
does not decode, a comparison that raises, a crash, a timeout) is ``scored`` and failed, with the reason in
``details``; ``error`` is kept for failures on our side (no test plan, the sandbox could not start), so a
wrong program can never remove itself from the metrics. Every string of a verdict is made writable as
UTF-8 (lone surrogates replaced), so no sample's content can break the run's output files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, SandboxError
from ..records import Sample, Verdict
from ..sandbox.codec import CodecError, encode
from ..sandbox.datasets import DATASETS
from ..sandbox.isolation import Limits
from ..sandbox.launcher import ENCODE_RATE, PROGRAM_RATE, step_limit
from ..sandbox.plans import PlanCache, TestPlan, default_cache_dir, machine_fingerprint, plan_key
from ..sandbox.pool import Sandbox
from ..sandbox.programs import build_program
from ..sandbox.verdicts import Outcome, clean_text, judge_outputs, outcome_from_run
from .base import Verifier
from .code_options import CodeOptions

log = logging.getLogger(__name__)
MAX_COMPLETION_CHARS = 4 << 20  # far beyond any generation budget; larger text is failed unread
# untrusted_check gives a process min(cap, sum of limits) + 1 s, then joins it for 1 s more (fast_check, as
# evaluate runs it): 2 s beyond the sum of the limits.
EVALPLUS_PROCESS_SLACK_S = 2.0


class CodeVerifier(Verifier):
    """``CodeVerifier(dataset="humaneval")``; options: ``unsafe_local_exec``, ``workers``, ``min_time_limit``
    (s, floor per test), ``time_limit_factor`` (× the reference's time), ``time_limit_margin`` (× every limit:
    1.0 applies EvalPlus's limits as they are; raise it on a machine too loaded for them), ``sample_time_limit``
    (s, cap on the tests of one sample, per test group), ``load_time_limit`` (s, to import the program, for the
    assert-style sets), ``memory_mb`` (address space per child), ``cache_dir``, ``uid_base`` (first of the
    per-slot uids when root), ``fresh_sandbox_per_sample`` (start a new bwrap sandbox for every sample instead
    of forking from a warm one: slower, stricter).

    Time limits follow EvalPlus 0.3.1 (``evalplus/eval/__init__.py: untrusted_check``): each test gets
    ``max(min_time_limit, time_limit_factor * t)``, ``t`` the reference's time on that input measured by the
    trusted pool on this machine; on the EvalPlus sets the base and the plus inputs are two groups, each with
    the budget ``min(sample_time_limit, sum of its limits) + 2 s`` that loading the program counts against.
    A call is over its limit when the job's CPU time is (its own busy processes included), or its own time is:
    the wall clock less the time it waited for a CPU, as the kernel counts it (``sandbox.load``). On an idle
    machine that is the wall clock, so a call that sleeps past its limit fails as in EvalPlus; on a busy one the
    waits are left out, so load fails no honest code and lengthens no sleeper's allowance: a verdict depends on
    its own candidate, not on what runs beside it. A group is over its budget likewise, loading the program
    included, as EvalPlus's process timeout counts it. Every call is timed from outside the candidate's process
    (the job's steward sends it each input only when its call begins, measures with the kernel's counters and
    kills it when over), so nothing the program does in its own interpreter changes a time; the parent's own
    deadlines end the job from outside.
    Values are encoded from the builtin storage of their type (a subclass's methods never decide a value)."""

    name = "code"
    version = "7"  # v7: calls timed by the steward outside the candidate's process (v6: inside it; v5: wall limits
    # times the machine's load when the job started)
    Options = CodeOptions

    def __init__(self, dataset: str, *, unsafe_local_exec: bool = False, workers: int | None = None,
                 min_time_limit: float = 1.0, time_limit_factor: float = 4.0, time_limit_margin: float = 1.0,
                 sample_time_limit: float = 60.0,
                 load_time_limit: float = 5.0, memory_mb: int = 2048, cache_dir: str | Path | None = None,
                 uid_base: int = 61000, fresh_sandbox_per_sample: bool = False, **options: Any):
        super().__init__(dataset=dataset, unsafe_local_exec=unsafe_local_exec, workers=workers, **options)
        if dataset not in DATASETS:
            raise ConfigError(f"code verifier: unknown dataset {dataset!r}; use one of {', '.join(sorted(DATASETS))}")
        self.dataset = DATASETS[dataset]
        self.min_time_limit, self.time_limit_factor = float(min_time_limit), float(time_limit_factor)
        self.time_limit_margin = float(time_limit_margin)
        self.sample_time_limit, self.load_time_limit = float(sample_time_limit), float(load_time_limit)
        self.cache = PlanCache(Path(cache_dir) / "code-plans" if cache_dir else default_cache_dir())
        self._cache_configured = cache_dir is not None
        limits = Limits(address_space=int(memory_mb) << 20)
        self.sandbox = Sandbox(workers, limits, unsafe_local_exec=unsafe_local_exec, uid_base=uid_base,
                               warm=not fresh_sandbox_per_sample)
        self.trusted = self.sandbox.trusted_twin()  # reference runs for plans: never a candidate's code
        self._plans: dict[str, TestPlan] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    # ------------------------------------------------------------------ plans

    def plan_for(self, sample: Sample) -> TestPlan:
        """The trusted test plan of ``sample`` (memory, then disk cache, then built in the sandbox)."""
        key = plan_key(f"{self.dataset.name}@{self.version}", sample.model_dump(mode="json"))
        with self._guard:
            if key in self._plans:
                return self._plans[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._plans:
                plan = self.cache.get(key)
                if plan is None:
                    plan = self.dataset.build_plan(sample, self.trusted)
                    if not plan.golden["passed"]:
                        log.warning("%s %s: %s", self.dataset.name, sample.id, plan.golden["reason"])
                    self.cache.put(key, plan)
                self._plans[key] = plan
        return self._plans[key]

    def use_cache_dir(self, root: Path) -> None:
        """Plans live under the run's cache directory unless ``cache_dir`` was given."""
        if not self._cache_configured:
            self.cache = PlanCache(Path(root) / "code-plans")

    def time_limits(self, plan: TestPlan) -> list[float]:
        """Per test: EvalPlus's ``max(floor, factor * reference time)``, times the stated margin."""
        return [max(self.min_time_limit, self.time_limit_factor * (t or 0.0)) * self.time_limit_margin
                for t in plan.ref_times]

    def budgets(self, plan: TestPlan, limits: list[float]) -> list[list[float]] | None:
        """``[[end, seconds], ...]``: EvalPlus's total per process (base inputs, then plus inputs), or None for
        the assert-style sets, whose tests run under one deadline."""
        if plan.base_count is None:
            return None
        groups = [(0, plan.base_count), (plan.base_count, len(limits))]
        return [[end, min(self.sample_time_limit, sum(limits[start:end])) + EVALPLUS_PROCESS_SLACK_S]
                for start, end in groups if end > start]

    # ------------------------------------------------------------------ verification

    def verify(self, sample: Sample, completion: str) -> Verdict:
        program = self._program(sample, completion)
        if program is None:
            return Verdict(answer=None, details={"failure": "unbuildable_program",
                                                 "error": f"completion of {len(completion)} characters could not be "
                                                          f"made into a program"})
        try:
            plan = self.plan_for(sample)
            if not plan.calls:
                raise ValueError(f"task {sample.id} has no usable tests ({plan.golden['reason']})")
            outcome = self._run(plan, program)
        except (OSError, SandboxError, CodecError, KeyError, ValueError) as exc:  # our side failed, not the model
            log.exception("code verifier infrastructure error on %s", sample.id)
            return Verdict(status="error", answer=clean_text(program),
                           details={"error": clean_text(f"{type(exc).__name__}: {exc}"[:300])})
        details = outcome.details()
        if not plan.golden["passed"]:
            details["reference_failed"] = plan.golden["reason"]
        return Verdict(score=1.0 if outcome.passed else 0.0, passed=outcome.passed, answer=clean_text(program),
                       details=_clean(details))

    def _program(self, sample: Sample, completion: str) -> str | None:
        """The program to run, or None when the completion cannot be one (never an exception: it is model text)."""
        if not isinstance(completion, str) or len(completion) > MAX_COMPLETION_CHARS:
            return None
        prefix = sample.prompt if self.dataset.continues_prompt else None
        try:
            return build_program(prefix, completion, sample.metadata["entry_point"], self.dataset.strip_markers)
        except Exception:  # bounded text processing of hostile input: whatever fails is the sample's fail
            log.warning("could not build a program from a completion of %s", sample.id, exc_info=True)
            return None

    def _run(self, plan: TestPlan, program: str) -> Outcome:
        limits = self.time_limits(plan)
        budgets = self.budgets(plan, limits)
        gauge = self.sandbox.load
        job = {"mode": "call", "program": program, "entry_point": plan.entry_point, "inputs": plan.calls,
               "limits": limits, "load_limit": self.load_time_limit, "setup": plan.setup,
               "wall_scale": gauge.wall_scale()}
        if budgets:  # EvalPlus has no load limit of its own: loading spends the group's budget
            job.update(budgets=budgets, load_limit=budgets[0][1])
            cpu_s = sum(seconds for _, seconds in budgets)
        else:
            cpu_s = job["load_limit"] + min(self.sample_time_limit, sum(limits))
        # the parent's deadlines end the job from outside, whatever the candidate does with the child's alarms;
        # the machine's load stretches them (read as the job starts and again at a deadline), never the verdict
        shipped_s = sum(plan.call_bytes) / ENCODE_RATE  # every input in, every answer out
        deadline = cpu_s + 3.0 + shipped_s
        outcome = Outcome(plan)
        steps = [job["load_limit"] + len(program) / PROGRAM_RATE + shipped_s,  # the payload comes first
                 *(step_limit(limit, size) for limit, size in zip(limits, plan.call_bytes))]
        run = self.sandbox.run_job(job, deadline, outcome.accept, steps=steps, stretch=gauge.stretch)
        outcome_from_run(outcome, run)
        if outcome.passed and plan.judge is not None:
            self._judge(plan, outcome)
        return outcome

    def _judge(self, plan: TestPlan, outcome: Outcome) -> None:
        try:
            replay = [{"args": call, **({"ok": encode(out)} if ok else {"err": out})}
                      for call, (ok, out) in zip(plan.calls, outcome.outputs)]
        except CodecError as exc:  # decoded candidate output that cannot be replayed: its own fail
            outcome.passed = False
            outcome._fail("bad_output", None, error=str(exc)[:200])
            return
        job = {"mode": "judge", "program": plan.judge["program"], "entry_point": plan.entry_point,
               "test": plan.judge["test"], "test_limit": 30.0, "seed": 0, "outputs": replay}
        judge_outputs(outcome, self.sandbox.run_job(job, 40.0))

    def verify_batch(self, items: Sequence[tuple[Sample, str]]) -> list[Verdict]:
        unique = list({s.id: s for s, _ in items}.values())
        self.sandbox.map(self._plan_or_none, unique)  # plans first, in parallel, so candidates never wait in line
        return self.sandbox.map(lambda item: self.verify(*item), items)

    def _plan_or_none(self, sample: Sample) -> TestPlan | None:
        try:
            return self.plan_for(sample)
        except (OSError, CodecError, KeyError, ValueError):
            log.exception("could not build the test plan of %s", sample.id)
            return None

    # ------------------------------------------------------------------ contract

    def gold_completion(self, sample: Sample) -> str | None:
        return self.dataset.gold(sample)

    def cache_identity(self) -> dict[str, Any]:
        # another rule for the wall limits, another verdict
        return {"references_timed_on": machine_fingerprint(), "wall_limits": self.sandbox.load.rule}

    def describe(self) -> dict[str, Any]:
        return {**self.sandbox.describe(), "dataset": self.dataset.name, "verifier_version": self.version,
                "time_limits": {"min_per_test_s": self.min_time_limit, "factor_of_reference": self.time_limit_factor,
                                "margin": self.time_limit_margin, "per_group_cap_s": self.sample_time_limit,
                                "reference_times": self._reference_times(), "wall_clock": self.sandbox.load.summary()}}

    def _reference_times(self) -> dict[str, Any]:
        """What the limits of this run's plans were scaled from: per-input reference times on this machine."""
        with self._guard:
            plans = sorted(self._plans.items())
        times = [t for _, plan in plans for t in plan.ref_times if t is not None]
        limits = [limit for _, plan in plans for limit in self.time_limits(plan)]
        digest = hashlib.sha256(json.dumps([[key, plan.ref_times] for key, plan in plans]).encode()).hexdigest()
        return {"machine": machine_fingerprint(), "clock": "CPU time of each call (the limits are on CPU time too)",
                "measured_by": "the trusted sandbox pool, once per task and machine",
                "tasks": len(plans), "inputs": len(times), "sum_s": round(sum(times), 3),
                "limits_above_floor": sum(limit > self.min_time_limit * self.time_limit_margin for limit in limits),
                "sha256": digest}

    def close(self) -> None:
        self.sandbox.close()
        self.trusted.close()



def _clean(value: Any) -> Any:
    """``details`` with every string writable as UTF-8."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value
