"""A call that sleeps or blocks past its limit fails as in EvalPlus; a busy machine still fails no honest code.

Each program runs through DARE's code verifier and through EvalPlus 0.3.1's ``untrusted_check`` alone, on the
same task: one input, a 0.5 s limit (EvalPlus's base process then has min(60, 0.5) + 1 s, joined for 1 s
more; DARE's group budget is the same 2.5 s). On an idle machine DARE's wall limit is the CPU limit (the load
scale is 1), so a sleep past the limit fails in both. The sleeps are 1.5 s, 3 times the limit: the old
fourfold wall-clock backstop passed them. The load scale is pinned at an idle machine's 1 for these (the
verdicts are then load-independent); the gauge and a verdict under real load are tested on their own. The
classes where DARE is stricter are named: EvalPlus's alarm fires once and can be caught, blocked or ignored
from inside the call; DARE's limits are checked again after the call and enforced by the parent from outside.
"""

from __future__ import annotations

import os
import time

import pytest

from dare.harness.sandbox.load import LoadGauge

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


class IdleReading(LoadGauge):
    """The scale an idle machine reads."""

    def scale(self) -> float:
        self.readings.append(1.0)
        return 1.0


@pytest.fixture()
def idle_verifier(code_verifier):
    """The verifier at an idle machine's load scale (1): these verdicts are EvalPlus's on an unloaded machine
    whatever else runs here. The gauge's own readings, and verdicts under real load, are tested below."""
    real, code_verifier.sandbox.load = code_verifier.sandbox.load, IdleReading()
    yield code_verifier
    code_verifier.sandbox.load = real


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_sleeping_program_gets_evalplus_verdict_or_the_named_stricter_one(idle_verifier, name):
    source, evalplus_expected, dare_expected = CASES[name]
    program = IMPORTS + source
    started = time.monotonic()
    assert dare_verdict(idle_verifier, program, [[3]], [6]) == dare_expected
    assert time.monotonic() - started < 8, "the parent's deadlines end a job that ignores every alarm"
    assert evalplus_verdict(program, [[3]], [6], LIMIT) == evalplus_expected


def test_a_busy_process_on_every_core_fails_no_honest_program_and_still_fails_a_sleeper(code_verifier):
    """A busy process held on each core leaves a job half of whichever core it runs on: 0.4 s of CPU per call
    under the 0.5 s limit takes 0.8 s of wall time, over the limit. The scale (2: three tasks on two cores,
    at most two on the job's) lifts the wall limit to 1 s, so the honest calls pass; the mean share the v4
    rule assumed (1.5) gave 0.75 s and failed them. A 3 s sleep still fails."""
    honest = ("def f(k):\n    end = time.process_time() + 0.4\n    while time.process_time() < end:\n"
              "        pass\n    return 2 * k\n")
    sleeper = CALL.format(body="    time.sleep(3.0)\n")
    hogs = busy_processes(len(os.sched_getaffinity(0)), one_per_core=True)
    try:
        started = time.monotonic()
        honest_verdicts = [dare_verdict(code_verifier, IMPORTS + honest, [[1], [2], [3]], [2, 4, 6])
                           for _ in range(2)]
        wall = (time.monotonic() - started) / 2
        sleeper_verdict = dare_verdict(code_verifier, IMPORTS + sleeper, [[3]], [6])
        scales = code_verifier.sandbox.load.readings[-3:]
    finally:
        for hog in hogs:
            hog.kill()
    assert wall > 3 * LIMIT, f"the machine was not loaded ({wall:.2f} s for three calls)"
    assert honest_verdicts == [(True, None)] * 2
    assert sleeper_verdict == (False, "timeout")
    assert all(scale >= 2 for scale in scales), scales
    assert code_verifier.describe()["time_limits"]["wall_clock"]["load_scale"]["max"] >= max(scales)


def test_the_gauge_reads_one_on_an_idle_machine_and_more_under_load():
    gauge = LoadGauge()
    assert gauge.scale() >= 1.0
    hogs = busy_processes(2 * gauge.cores)
    try:
        loaded = gauge.scale()
    finally:
        for hog in hogs:
            hog.kill()
    assert loaded >= 1.9, loaded  # 2 x cores CPU-bound tasks, plus the reader
    assert gauge.summary()["load_scale"]["jobs"] == 2


@pytest.mark.parametrize("reads, cores, scale", [
    ((1, 1, 1), 2, 1.0),  # the reader alone: an idle machine
    ((2, 2, 3), 2, 1.0),  # one busy process, and a task seen once (short-lived): the job gets the other core
    ((3, 3, 3), 2, 2.0),  # two busy processes on two cores: one shares the job's core (the mean would say 1.5)
    ((5, 5, 5), 2, 3.0),
    ((9, 9, 9), 4, 3.0),
])
def test_the_scale_is_the_most_tasks_a_balanced_scheduler_puts_on_the_jobs_core(monkeypatch, reads, cores, scale):
    from dare.harness.sandbox import load

    values = iter(reads)
    monkeypatch.setattr(load, "runnable_tasks", lambda: float(next(values)))
    monkeypatch.setattr(load, "usable_cores", lambda: cores)
    assert load.LoadGauge().scale() == scale
