"""A call that sleeps or blocks past its limit fails as in EvalPlus; a busy machine still fails no honest code.

Each program runs through DARE's code verifier and through EvalPlus 0.3.1's ``untrusted_check`` alone, on the
same task: one input, a 0.5 s limit (EvalPlus's base process then has min(60, 0.5) + 1 s, joined for 1 s
more; DARE's group budget is the same 2.5 s). DARE's wall limit applies to a call's own time (the wall clock
less its waits for a CPU), which is the wall clock on an idle machine and which no other process lengthens:
a sleep past the limit fails in both, whatever else runs here. The sleeps are 1.5 s, 3 times the limit: the
old fourfold wall-clock backstop passed them. The classes where DARE is stricter are named: EvalPlus's alarm
fires once and can be caught, blocked or ignored from inside the call; DARE's limits are checked again after
the call and enforced by the parent from outside.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import pytest

from dare.harness.sandbox.isolation import detect
from dare.harness.sandbox.load import LoadGauge
from dare.harness.verifiers.code import CodeVerifier

from .busy import busy_processes
from .verdict_pairs import dare_verdict, evalplus_verdict, verifier_fixture

LIMIT = 0.5
IMPORTS = "import signal, time\n"
CALL = "def f(k):\n{body}    return 2 * k\n"

# name -> (program, EvalPlus's verdict, DARE's); a DARE verdict other than EvalPlus's is the stricter one, named
CASES = {
    "sleep_within_limit": (CALL.format(body="    time.sleep(0.1)\n"), "pass", (True, None)),
    "sleep_past_limit": (CALL.format(body="    time.sleep(1.5)\n"), "fail", (False, "timeout")),
    "alarm_ignored_at_import": ("signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                + CALL.format(body="    time.sleep(1.5)\n"), "fail", (False, "timeout")),
    "module_sleeps_within_budget": ("time.sleep(1.0)\n" + CALL.format(body=""), "pass", (True, None)),
    "module_sleeps_past_budget": ("time.sleep(6.0)\n" + CALL.format(body=""), "timeout", (False, "timeout")),
    "timeout_swallowed_then_sleeps_on": (
        CALL.format(body="    while True:\n        try:\n            time.sleep(30)\n        except BaseException:\n"
                         "            pass\n"), "timeout", (False, "timeout")),
    # stricter: EvalPlus's one alarm is caught and the call returns the right answer late
    "timeout_swallowed": (CALL.format(body="    try:\n        time.sleep(1.5)\n    except BaseException:\n"
                                           "        pass\n"), "pass", (False, "timeout")),
    # stricter: EvalPlus's alarm is ignored, or blocked, from inside the call
    "alarm_ignored_in_call": (CALL.format(body="    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                               "    time.sleep(1.5)\n"), "pass", (False, "timeout")),
    "alarm_blocked_in_call": (CALL.format(body="    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
                                               "    time.sleep(1.5)\n"), "pass", (False, "timeout")),
    # the value is read from storage: the slow methods never run, in either
    "sleep_in_result_encoding": (
        "class Slow(int):\n    def __index__(self):\n        time.sleep(30)\n        return 0\n"
        "    __int__ = __float__ = __repr__ = __str__ = __index__\n"
        "def f(k):\n    return Slow(2 * k)\n", "pass", (True, None)),
}


code_verifier = verifier_fixture(LIMIT)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_sleeping_program_gets_evalplus_verdict_or_the_named_stricter_one(code_verifier, name):
    source, evalplus_expected, dare_expected = CASES[name]
    program = IMPORTS + source
    started = time.monotonic()
    assert dare_verdict(code_verifier, program, [[3]], [6]) == dare_expected
    assert time.monotonic() - started < 8, "the parent's deadlines end a job that ignores every alarm"
    assert evalplus_verdict(program, [[3]], [6], LIMIT) == evalplus_expected


HONEST = ("def f(k):\n    end = time.process_time() + 0.4\n    while time.process_time() < end:\n"
          "        pass\n    return 2 * k\n")


def test_a_busy_process_on_every_core_fails_no_honest_program_and_lengthens_no_sleep(code_verifier):
    """A busy process held on each core leaves a job half of whichever core it runs on: 0.4 s of CPU per call
    under the 0.5 s limit takes 0.8 s of wall time, over the limit, and passes, since the half spent waiting
    for the core is not the call's own time. A 0.9 s sleep still fails: v5's rule (the wall limit times the
    load, 2 here) passed it."""
    sleeper = CALL.format(body="    time.sleep(0.9)\n")
    hogs = busy_processes(len(os.sched_getaffinity(0)), one_per_core=True)
    try:
        started = time.monotonic()
        honest_verdicts = [dare_verdict(code_verifier, IMPORTS + HONEST, [[1], [2], [3]], [2, 4, 6])
                           for _ in range(2)]
        wall = (time.monotonic() - started) / 2
        sleeper_verdict = dare_verdict(code_verifier, IMPORTS + sleeper, [[3]], [6])
    finally:
        for hog in hogs:
            hog.kill()
    assert wall > 3 * LIMIT, f"the machine was not loaded ({wall:.2f} s for three calls)"
    assert honest_verdicts == [(True, None)] * 2
    assert sleeper_verdict == (False, "timeout")
    wall_clock = code_verifier.describe()["time_limits"]["wall_clock"]
    assert wall_clock["rule"].startswith("wall limit on own time") and wall_clock["load_scale"]["max"] >= 2


def honest_calls_as_load_arrives(verifier: CodeVerifier, monkeypatch) -> tuple[bool, str | None]:
    """The honest program's verdict when busy processes start 0.3 s after the parent first reads the load for
    the job, when the job's process has started and is loading or in its first call."""
    gauge = verifier.sandbox.load
    hogs: list = []
    timers: list[threading.Timer] = []

    def stretch_then_load() -> float:
        if not timers:
            timers.append(threading.Timer(0.3, lambda: hogs.extend(busy_processes(2 * len(os.sched_getaffinity(0))))))
            timers[0].start()
        return type(gauge).stretch(gauge)

    monkeypatch.setattr(gauge, "stretch", stretch_then_load)
    try:
        started = time.monotonic()
        verdict = dare_verdict(verifier, IMPORTS + HONEST, [[1], [2], [3]], [2, 4, 6])
        wall = time.monotonic() - started
    finally:
        timers[0].join()
        for hog in hogs:
            hog.kill()
    assert hogs and wall > 3 * LIMIT + 0.5, f"the machine was not loaded ({wall:.2f} s for three calls)"
    return verdict


def test_load_that_arrives_after_a_job_started_fails_no_honest_call(code_verifier, monkeypatch):
    """Busy processes start after everything v5 read the load for: its wall limits stayed at the idle machine's
    and the honest calls (0.4 s of CPU, about 1 s of wall time under the load) failed. Own time leaves the waits
    out, and the parent's deadlines follow the load."""
    assert honest_calls_as_load_arrives(code_verifier, monkeypatch) == (True, None)


def test_without_a_pid_namespace_the_host_s_processes_are_not_the_job_s(monkeypatch, tmp_path):
    """With --unsafe-local-exec the job's /proc is the host's: the busy processes started during the job are
    the machine's, not the job's CPU time (counting every process /proc lists failed the honest calls)."""
    none = dataclasses.replace(detect(), backend="none")
    monkeypatch.setattr("dare.harness.sandbox.pool.detect", lambda uid_base: none)
    verifier = CodeVerifier("humanevalplus", unsafe_local_exec=True, workers=1, cache_dir=tmp_path,
                            min_time_limit=LIMIT)
    try:
        assert honest_calls_as_load_arrives(verifier, monkeypatch) == (True, None)
    finally:
        verifier.close()


def test_busy_processes_of_the_candidate_s_own_count_as_its_cpu_time(code_verifier):
    """A program that forks busy loops makes its own calls wait for a CPU; those waits are its doing, not the
    machine's, so the loops' CPU time counts against the call's limit. Otherwise a call could buy wall time at
    no CPU cost. EvalPlus fails it too (its wall clock sees the waits). The loops end themselves after 5 s."""
    forks = ("import os\nfor _ in range(2 * os.cpu_count()):\n    if os.fork() == 0:\n"
             "        end = time.time() + 5\n        while time.time() < end:\n            pass\n        os._exit(0)\n")
    program = IMPORTS + forks + HONEST.replace("0.4", "0.3")
    assert dare_verdict(code_verifier, program, [[3]], [6]) == (False, "timeout")
    assert evalplus_verdict(program, [[3]], [6], LIMIT) in ("fail", "timeout")


def test_the_gauge_reads_one_on_an_idle_machine_and_more_under_load():
    gauge = LoadGauge()
    assert gauge.stretch() >= 1.0 and gauge.wall_scale() == 1.0  # the kernel reports waits here
    hogs = busy_processes(2 * gauge.cores)
    try:
        loaded = gauge.stretch()
    finally:
        for hog in hogs:
            hog.kill()
    assert loaded >= 1.9, loaded  # 2 x cores CPU-bound tasks, plus the reader
    assert gauge.summary()["load_scale"]["reads"] == 2


@pytest.mark.parametrize("reads, cores, scale", [
    ((1, 1, 1), 2, 1.0),  # the reader alone: an idle machine
    ((2, 2, 3), 2, 1.0),  # one busy process, and a task seen once (short-lived): the job gets the other core
    ((3, 3, 3), 2, 2.0),  # two busy processes on two cores: one shares the job's core (the mean would say 1.5)
    ((5, 5, 5), 2, 3.0),
    ((9, 9, 9), 4, 3.0),
])
def test_the_stretch_is_the_most_tasks_a_balanced_scheduler_puts_on_the_jobs_core(monkeypatch, reads, cores, scale):
    from dare.harness.sandbox import load

    values = iter(reads)
    monkeypatch.setattr(load, "runnable_tasks", lambda: float(next(values)))
    monkeypatch.setattr(load, "usable_cores", lambda: cores)
    assert load.LoadGauge().stretch() == scale
