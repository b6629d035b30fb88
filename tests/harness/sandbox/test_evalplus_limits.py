"""EvalPlus's time limits and process boundaries, as the code verifier applies them (evalplus 0.3.1,
``evalplus/eval/__init__.py``: ``untrusted_check`` and ``unsafe_execute``).

Each test runs a hand-built plan through the real sandbox: per input ``max(floor, factor * t_ref)``, per group
(base inputs, then plus inputs) ``min(cap, sum of limits) + 2 s`` with the program's load counted against it,
and the sticky ``atol`` starting over with the plus inputs, which EvalPlus checks in a fresh process. A
CPU-bound call is judged by its CPU time, which the machine's load does not change; a call that sleeps is
judged by its wall time against the limit times the load scale (test_sleeping_calls.py).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from dare.harness.sandbox import plans
from dare.harness.sandbox.codec import encode
from dare.harness.verifiers.code import EVALPLUS_PROCESS_SLACK_S, CodeVerifier

from .busy import busy_processes

ORACLE = "evalplus:mbpp"


def plan(outputs: list, base_count: int | None, ref_time: float = 0.001) -> plans.TestPlan:
    n = len(outputs)
    return plans.TestPlan("f", [encode([[k], {}]) for k in range(n)], [encode(o) for o in outputs], [ORACLE] * n,
                    [ref_time] * n, base_count=base_count)


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    made = CodeVerifier("mbppplus", workers=1, cache_dir=tmp_path_factory.mktemp("plans"), min_time_limit=0.4,
                        sample_time_limit=0.5)
    yield made
    made.close()


def run(verifier: CodeVerifier, the_plan: plans.TestPlan, program: str):
    outcome = verifier._run(the_plan, program)
    return outcome.passed, outcome.failure


# Busy for {s} s of CPU time per call: the limits count CPU time, which load on the machine does not stretch.
BUSY = ("import time\ndef busy(s):\n    end = time.process_time() + s\n"
        "    while time.process_time() < end:\n        pass\n")
SLOW = BUSY + "def f(k):\n    busy({s})\n    return k\n"


def test_a_call_over_its_limit_fails_and_the_margin_is_applied(verifier):
    slow = SLOW.format(s=0.6)  # over the 0.4 s floor (the reference takes 1 ms), under 0.4 x 2
    assert run(verifier, plan([0], base_count=1), slow) == (False, "timeout")
    verifier.time_limit_margin = 2.0
    try:
        assert run(verifier, plan([0], base_count=1), slow) == (True, None)
    finally:
        verifier.time_limit_margin = 1.0


def test_load_on_the_machine_does_not_change_a_verdict(verifier):
    """0.3 s of CPU per call under a 0.4 s limit passes while a busy process held on each core leaves it half of
    its core (0.6 s of wall time per call, over the limit); a sleeping call is stopped by its wall limit."""
    hogs = busy_processes(len(os.sched_getaffinity(0)), one_per_core=True)
    try:
        started = time.monotonic()
        assert run(verifier, plan([0, 1, 2], base_count=3), SLOW.format(s=0.3)) == (True, None)
        wall = time.monotonic() - started
    finally:
        for hog in hogs:
            hog.kill()
    assert wall > 3 * 0.4, f"the machine was not loaded ({wall:.2f} s)"
    sleeper = "import time\ndef f(k):\n    time.sleep(30)\n    return k\n"
    started = time.monotonic()
    assert run(verifier, plan([0], base_count=1), sleeper) == (False, "timeout")
    assert time.monotonic() - started < 10


def test_each_group_has_its_own_budget(verifier):
    """12 calls of 0.25 s: each under its 0.4 s limit; one group spends 3 s, over min(0.5, 4.8) + 2."""
    outputs, slow = list(range(12)), SLOW.format(s=0.25)
    assert verifier.budgets(plan(outputs, 12), verifier.time_limits(plan(outputs, 12))) == [
        [12, 0.5 + EVALPLUS_PROCESS_SLACK_S]]
    assert run(verifier, plan(outputs, base_count=12), slow) == (False, "timeout")
    assert run(verifier, plan(outputs, base_count=6), slow) == (True, None)  # 1.5 s per group


def test_loading_the_program_spends_every_groups_budget(verifier):
    loads_slowly = SLOW.format(s=0.25) + "busy(1.6)\n"
    assert run(verifier, plan([0, 1], base_count=1), loads_slowly) == (True, None)  # 1.85 s of 2.4 per group
    # plus: 1.6 + 4 x 0.25 = 2.6 s, over min(0.5, 1.6) + 2; without the load it would be 1 s
    assert run(verifier, plan([0, 1, 2, 3, 4], base_count=1), loads_slowly) == (False, "timeout")


def test_the_sticky_atol_starts_over_with_the_plus_inputs(verifier):
    """A float expectation sets atol = 1e-6 for the rest of its process: [1, 2 + 1e-9] then matches [1, 2]
    within the base inputs, and fails as the first plus input."""
    program = "def f(k):\n    return 0.5 if k == 0 else [1, 2 + 1e-9]\n"
    assert run(verifier, plan([0.5, [1, 2]], base_count=2), program) == (True, None)
    assert run(verifier, plan([0.5, [1, 2]], base_count=1), program)[1] == "wrong_answer"


def test_run_json_records_the_limits_and_the_verdict_key_holds_the_machine(tmp_path, capsys, monkeypatch):
    """The reference times' machine is recorded and keys the verdicts: on another machine they are redone."""
    from dare.harness import cli
    from dare.harness.verifiers import code

    gold = "def similar_elements(test_tup1, test_tup2):\n  return tuple(set(test_tup1) & set(test_tup2))\n"
    completions = tmp_path / "mbppplus.jsonl"
    completions.write_text(json.dumps({"id": "Mbpp/2", "completion": gold}) + "\n")
    args = ["--no-progress", "--backend", "replay", "--suite", "mbppplus", "--completions", str(completions),
            "--limit", "1", "--out", str(tmp_path / "runs"), "--set", "verifier.time_limit_margin=1.5"]
    for machine in ("this", "another"):
        monkeypatch.setattr(code, "machine_fingerprint", lambda m=machine: m)
        assert cli.main(args) == 0
        run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
        record = json.loads((run_dir / "run.json").read_text())
        assert record["metrics"]["mbppplus"]["pass@1"]["value"] == 1.0
        limits = record["isolation"]["mbppplus"]["time_limits"]
        assert limits["margin"] == 1.5 and limits["reference_times"]["machine"] == machine
        assert limits["reference_times"]["tasks"] == 1 and limits["reference_times"]["inputs"] > 100
    assert len(list((tmp_path / "runs" / ".cache" / "verdicts").glob("code-*.jsonl"))) == 2
