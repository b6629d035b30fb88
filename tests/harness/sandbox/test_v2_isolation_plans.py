"""The trusted side of sandbox v2: plan cache checks, hostile reference records, the parent's clock, the
linear record splitter, and slot retirement after a protocol violation (real sandboxes, real files)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from dare.harness.data import load_samples
from dare.harness.sandbox import Sandbox, encode, plans
from dare.harness.sandbox.isolation import detect
from dare.harness.sandbox.launcher import ENCODE_RATE, END_S, STEP_SLACK_S, Clock, LineStream, step_limit
from dare.harness.sandbox.plans import PlanCache, default_cache_dir, plan_from_asserts, reference_calls
from dare.harness.sandbox.pool import TRUSTED_UID_OFFSET
from dare.harness.verifiers.code import CodeVerifier

needs_zygote = pytest.mark.skipif(detect().backend != "bwrap" or os.geteuid() != 0,
                                  reason="the per-slot zygote needs bubblewrap as root")
FORGER = """
import sys
def _channel():
    frame = sys._getframe(1)
    while frame is not None:
        if 'channel' in frame.f_locals:
            return frame.f_locals['channel']
        frame = frame.f_back
def add(a, b):
    ch = _channel()
    ch.send({"site": 10 ** 6, "args": [[1, 2], {}], "ok": 3, "t": 0.0})
    ch.send({"i": 10 ** 6, "ok": 3, "t": 0.0})
    return a + b
"""


@pytest.fixture(scope="module")
def sample():
    return next(s for s in load_samples("humaneval.jsonl") if s.id == "HumanEval/0")


def test_tampered_or_misplaced_cache_files_are_rejected_and_rebuilt(tmp_path, sample):
    verifier = CodeVerifier("humaneval", workers=1, cache_dir=tmp_path, min_time_limit=0.5)
    try:
        gold = verifier.gold_completion(sample)
        assert verifier.verify(sample, gold).passed
        (path,) = (tmp_path / "code-plans").glob("*.json")
        good = path.read_text()
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
        key = path.stem
        record = json.loads(good)
        cache = PlanCache(path.parent)
        assert cache.get(key) is not None
        record["plan"]["expected"][0] = not record["plan"]["expected"][0]  # content no longer matches its sha256
        path.write_text(json.dumps(record))
        assert cache.get(key) is None
        (path.parent / ("0" * 32 + ".json")).write_text(good)  # a valid plan filed under another key
        assert cache.get("0" * 32) is None
        verifier._plans.clear()
        assert verifier.verify(sample, gold).passed  # rebuilt from the trusted pool, file restored
        rebuilt, original = json.loads(path.read_text())["plan"], json.loads(good)["plan"]
        for field in ("calls", "expected", "oracles", "golden"):  # reference times are measured anew
            assert rebuilt[field] == original[field]
        assert verifier.trusted is not verifier.sandbox
        assert verifier.trusted.isolation.uid_base == verifier.sandbox.isolation.uid_base + TRUSTED_UID_OFFSET
    finally:
        verifier.close()


def test_hostile_reference_records_make_an_unusable_plan_not_a_crash():
    sandbox = Sandbox(workers=1)
    try:
        plan = plan_from_asserts(sandbox, FORGER, "add", "assert add(1, 2) == 3\n", None, FORGER)
        records, problem = reference_calls(sandbox, FORGER, "add", [encode([[1, 2], {}])])
    finally:
        sandbox.close()
    assert plan.golden["passed"] is False and "malformed reference record" in plan.golden["reason"]
    assert plan.calls == []
    # a call job's program holds no descriptor of the result channel: the Channel it finds writes nowhere
    assert problem is None and records[0]["err"] == "OSError" and "ok" not in records[0]


def test_base_count_counts_the_base_inputs_kept_after_dropped_ones():
    program = "def f(x):\n    if x == 1:\n        raise MemoryError\n    return x\n"
    calls = [encode([[x], {}]) for x in range(5)]
    sandbox = Sandbox(workers=1)
    try:
        plan = plans.plan_from_calls(sandbox, program, "f", calls, ["eq"] * 5, 0.0, base_count=3)
    finally:
        sandbox.close()
    assert plan.golden == {"passed": True, "reason": None, "dropped_inputs": {"MemoryError": 1}}
    assert len(plan.calls) == 4 and plan.base_count == 2 and len(plan.ref_times) == 4
    assert plans.TestPlan.from_json(plan.to_json()).base_count == 2
    old = {k: v for k, v in plan.to_json().items() if k != "base_count"}  # a plan cached before the field
    assert plans.TestPlan.from_json(old).base_count is None
    for bad in (5, -1, True, 2.0):
        with pytest.raises(plans.PlanError, match="base_count"):
            plans.TestPlan.from_json({**plan.to_json(), "base_count": bad})


def test_default_plan_cache_is_private_and_not_in_the_home_cache(monkeypatch):
    monkeypatch.delenv("DARE_CACHE_DIR", raising=False)
    root = default_cache_dir()
    assert ".cache" not in root.parts
    info = root.parent.stat()
    assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o700


def test_line_splitter_scans_every_byte_once():
    lines: list[bytes] = []
    stream = LineStream(64 << 20, lambda line: lines.append(line) or True)
    for _ in range(200):  # one long line without a newline: the scan position follows the buffer's end
        stream.feed(b"x" * 65536)
        assert stream.scanned == len(stream.buffer)
    stream.feed(b"\n" + b"a\n" * 1000 + b"tail")
    assert lines[0] == b"x" * (200 * 65536) and lines[1:] == [b"a"] * 1000
    assert bytes(stream.buffer) == b"tail" and stream.scanned == 4
    stream.feed(b"y" * (64 << 20))
    assert stream.truncated and len(stream.buffer) == 0


def test_clock_stretches_with_the_load_read_at_the_start_and_again_when_a_deadline_passes():
    """The parent's deadlines follow the machine's load: load that arrives mid-job moves a passed deadline instead
    of ending the job; a machine no busier than before ends it."""
    loads = iter([1.0, 3.0, 3.0])
    clock = Clock(100.0, [0.5, 2.0], stretch=lambda: next(loads))
    clock.restart()  # the job begins: the load is read
    assert clock.remaining() == pytest.approx(0.5 + STEP_SLACK_S, abs=0.05)
    clock.step_start -= 2.0  # two seconds into a 0.5 s step: its deadline has passed
    clock._deadlines()
    assert clock.remaining() < 0
    assert clock.extend() and clock.remaining() == pytest.approx(3 * 0.5 + STEP_SLACK_S - 2.0, abs=0.05)
    clock.step_start -= 1.0
    clock._deadlines()
    assert not clock.extend()  # no busier than when the deadline was set: out of time
    clock.advance()
    assert clock.remaining() == pytest.approx(3 * 2.0 + STEP_SLACK_S, abs=0.05)  # the next step at today's load


def test_clock_gives_each_step_its_own_deadline():
    clock = Clock(100.0, [0.5, 2.0])
    assert clock.remaining() == pytest.approx(0.5 + STEP_SLACK_S, abs=0.05)
    clock.advance()
    assert clock.remaining() == pytest.approx(2.0 + STEP_SLACK_S, abs=0.05)
    clock.advance()
    assert clock.remaining() == pytest.approx(END_S + STEP_SLACK_S, abs=0.05)  # the job's end, after the tests
    for _ in range(3):  # more records do not buy more time
        clock.advance()
        assert clock.remaining() == pytest.approx(END_S + STEP_SLACK_S, abs=0.05)
    assert Clock(5.0).remaining() == pytest.approx(5.0, abs=0.05)
    # a test's step: its limit, plus encoding and shipping an answer the size of the expected output
    assert step_limit(1.5, 0) == 1.5 and step_limit(1.5, 3 * ENCODE_RATE) == pytest.approx(4.5)
    plan = plans.TestPlan("f", [[[1], {"d": []}]] * 2, [[1, 2, 3], None], ["eq", "eq"], [None, None])
    assert plan.expected_bytes == [len("[1,2,3]"), 0]


@needs_zygote
def test_parent_ends_a_job_that_ignores_its_alarm_and_retires_slots_after_violations():
    """A call job's program is timed by its steward, from outside its process: blocking the alarms buys nothing and
    the slot stays. Behind every job stand the parent's deadlines and nonce checks, shown on record jobs, whose
    trusted program runs in the job's first process with the result channel."""
    spin = ("import signal\ndef f():\n    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGPROF})\n"
            "    while True:\n        pass\n")
    liar = ("import os\ndef f():\n    for fd in range(3, 64):\n        try:\n"
            "            os.write(fd, b'{\"n\": \"bad\", \"i\": 0, \"ok\": 1}\\n')\n"
            "        except OSError:\n            pass\n    return 1\n")
    good = "def f():\n    return 1\n"

    def job(program):
        return {"mode": "call", "program": program, "entry_point": "f", "inputs": [encode([[], {}])],
                "limits": [0.3], "load_limit": 5.0}

    def record_job(program):
        return {"mode": "record", "program": program, "entry_point": "f", "test": "assert f() == 1\n",
                "test_limit": 0.3, "seed": 0}

    sandbox = Sandbox(workers=1)
    try:
        first = sandbox.run_job(job(good), 60, steps=[5.0, 0.3])
        zygote = sandbox._zygotes[0]
        assert first.protocol_error is None and zygote.starts == 1
        spun = sandbox.run_job(job(spin), 60, steps=[5.0, 0.3])
        assert spun.records == [{"ready": True}, {"i": 0, "timeout": True}] and not spun.child.timed_out
        assert zygote.starts == 1
        spun = sandbox.run_job(record_job(spin), 60, steps=[0.3])
        assert spun.child.timed_out and spun.child.wall_s < 30  # the step deadline, not the 60 s job deadline
        assert sandbox.run_job(job(good), 60).protocol_error is None and zygote.starts == 2  # retired, restarted
        lied = sandbox.run_job(record_job(liar), 60)
        assert "nonce" in (lied.protocol_error or "")
        after = sandbox.run_job(job(good), 60)
        assert after.protocol_error is None and zygote.starts == 3
        assert [r for r in after.records if "i" in r][0]["ok"] == 1
        assert sandbox.run_job(job(liar), 60).records[1] == {"i": 0, "ok": 1}  # its own answer channel
    finally:
        sandbox.close()


def test_plans_live_under_the_runs_cache_directory_by_default(tmp_path):
    from ..helpers import dare_eval, run_record, write_completions

    samples = load_samples("humaneval.jsonl")[:1]
    path = write_completions(tmp_path / "gold.jsonl", [(samples[0].id, samples[0].reference)])
    home = tmp_path / "home"
    env = {"HOME": str(home), "DARE_CACHE_DIR": ""}
    proc = dare_eval("--backend", "replay", "--suite", "humaneval", "--limit", "1", "--completions", str(path),
                     "--out", str(tmp_path / "runs"), env=env)
    _, record = run_record(proc)
    assert record["metrics"]["humaneval"]["pass@1"]["value"] == 1.0
    assert list((tmp_path / "runs" / ".cache" / "code-plans").glob("*.json"))
    assert not (home / ".cache").exists()
    confinement = record["isolation"]["humaneval"]["job_confinement"]
    if detect().backend == "bwrap":  # each layer is recorded as a job saw it
        assert confinement["seccomp_mode"] == "2" and confinement["userns_creatable"] is False
        assert confinement["tmp"] == "tmpfs" and confinement["cap_eff"] == "0000000000000000"
