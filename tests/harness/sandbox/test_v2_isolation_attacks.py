"""Attacks on other jobs, the plan cache, memory remnants and lasting state (v2 classes 1, 2, 3, 6).

Each attack of ``isolation_attacks.py`` is graded next to the gold solution in one batch, with 1 and with
2 worker slots (real verifier, real bubblewrap sandbox), and the batch is graded twice: every attack
fails with ``status=scored``, every gold neighbour passes, the rerun gives the same verdicts, the plan
cache is byte-for-byte unchanged. Between the two batches a trusted inspection job runs in every slot and
must find nothing an attack left: no /tmp or /dev/shm entries, no SysV IPC objects, no other process,
no lowered priority or affinity. A positive control shows the memory scanner finds a reference when one
is in its memory, so its failure next to the gold is the isolation's doing.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from dare.harness.data import load_samples
from dare.harness.sandbox import encode
from dare.harness.sandbox.isolation import detect
from dare.harness.verifiers.code import CodeVerifier

from .isolation_attacks import ATTACKS, CLASSES, INSPECT, render

UID_BASE = 62000
pytestmark = pytest.mark.skipif(detect().backend != "bwrap" or os.geteuid() != 0,
                                reason="the per-slot zygote needs bubblewrap as root")


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def inspect_slots(verifier: CodeVerifier) -> list[dict]:
    job = {"mode": "call", "program": INSPECT, "entry_point": "inspect", "inputs": [encode([[], {}])],
           "limits": [10.0], "load_limit": 10.0}

    def one(_):
        outcome = verifier.sandbox.run_job(job, 30)
        record = next(r for r in outcome.records if r.get("i") == 0)
        from dare.harness.sandbox import decode
        return dict(decode(record["ok"]).items())

    return verifier.sandbox.map(one, range(verifier.sandbox.workers))


def verifier_for(workers: int, cache: Path) -> CodeVerifier:
    return CodeVerifier("humaneval", workers=workers, cache_dir=cache, min_time_limit=0.5, sample_time_limit=3,
                        load_time_limit=3, memory_mb=512, uid_base=UID_BASE)


@pytest.fixture(scope="module", params=[1, pytest.param(2, marks=pytest.mark.extended)], ids=["1-slot", "2-slots"])
def graded(request, tmp_path_factory):
    cache = tmp_path_factory.mktemp("plans")
    sample = next(s for s in load_samples("humaneval.jsonl") if s.id == "HumanEval/0")
    verifier = verifier_for(request.param, cache)
    try:
        gold = verifier.gold_completion(sample)
        first_gold = verifier.verify(sample, gold)  # builds the plan in the trusted pool
        before = snapshot(cache)
        baseline = inspect_slots(verifier)
        names = sorted(ATTACKS)
        items = [pair for name in names for pair in ((sample, render(name, str(cache))), (sample, gold))]
        first = verifier.verify_batch(items)
        inspections = inspect_slots(verifier)
        second = verifier.verify_batch(items)
        after = snapshot(cache)
        described = verifier.describe()
    finally:
        verifier.close()
    yield {"names": names, "first": first, "second": second, "first_gold": first_gold, "before": before,
           "after": after, "inspections": inspections, "baseline": baseline, "describe": described, "workers": request.param}


def test_suite_covers_every_class_of_the_review():
    assert len(ATTACKS) >= 20
    assert set(CLASSES.values()) == {1, 2, 3, 6} and set(CLASSES) == set(ATTACKS)


def test_every_attack_fails_and_every_gold_neighbour_passes(graded):
    assert graded["first_gold"].passed
    for run in ("first", "second"):
        verdicts = graded[run]
        for name, attack, gold in zip(graded["names"], verdicts[0::2], verdicts[1::2]):
            assert attack.status == "scored" and attack.passed is False, (run, name, attack.details)
            assert "LEAK" not in json.dumps(attack.details), (run, name, attack.details)
            assert gold.status == "scored" and gold.passed is True, (run, name, gold.details)


def test_rerun_gives_identical_verdicts(graded):
    def key(v):
        return v.status, v.passed, v.score
    assert [key(v) for v in graded["first"]] == [key(v) for v in graded["second"]]


def test_plan_cache_is_unchanged(graded):
    assert graded["before"] and graded["before"] == graded["after"]


def test_nothing_of_an_attack_is_left_for_the_next_job(graded):
    assert len(graded["inspections"]) == graded["workers"]
    for seen in graded["inspections"]:
        assert seen["tmp"] == [] and seen["shm"] == [], seen
        assert seen["ipc"] == [], seen
        assert seen["procs"] == [1, 2], seen  # its steward and itself, alone in their own pid namespace
        assert seen["nice"] == 0 and seen["affinity"] == len(os.sched_getaffinity(0)), seen
        assert seen["keys"] == [], seen  # no key planted in any keyring the slot uid can view


def test_failures_are_the_expected_kinds(graded):
    kinds = {n: v.details.get("failure") for n, v in zip(graded["names"], graded["first"][0::2])}
    assert kinds["sleep_past_deadline_then_forge"] == "timeout"
    # The candidate's process holds no descriptor of the result channel (its steward does): the runner's Channel
    # an attack finds on the stack writes to a descriptor closed there, and a record written to every descriptor
    # reaches only the candidate's own answer channel, where it is the candidate's (wrong) answer.
    assert kinds["records_after_the_end_with_nonce"] == "runtime_error"
    assert kinds["out_of_range_and_forged_kinds"] == "runtime_error"
    assert kinds["forge_reference_site_records"] == "runtime_error"
    assert kinds["wrong_nonce_records"] == "wrong_answer"
    assert kinds["scan_own_memory_for_the_reference"] == "wrong_answer"


def test_job_confinement_is_recorded(graded):
    confinement = graded["describe"]["job_confinement"]
    assert graded["describe"]["warm_servers"] is True
    assert confinement["uid"] == UID_BASE and confinement["cap_eff"] == "0000000000000000"
    assert confinement["seccomp_mode"] == "2" and confinement["userns_creatable"] is False
    assert confinement["tmp"] == "tmpfs" and confinement["shm"] == "tmpfs" and confinement["fresh_ipc_ns"] is True
    assert confinement["session_keyring"] is True


def test_memory_scanner_finds_a_reference_held_in_its_own_memory(tmp_path):
    """Positive control: the same scanner passes when the gold program is in its memory (as a payload
    string would be in a server that once held it), so its failure above is the isolation's doing."""
    sample = next(s for s in load_samples("humaneval.jsonl") if s.id == "HumanEval/0")
    verifier = verifier_for(1, tmp_path)
    try:
        gold_program = sample.prompt + sample.metadata["canonical_solution"]
        planted = f"_PAYLOAD = {json.dumps(json.dumps({'program': gold_program}))}\n"
        control = verifier.verify(sample, render("scan_own_memory_for_the_reference", str(tmp_path), planted))
        plain = verifier.verify(sample, render("scan_own_memory_for_the_reference", str(tmp_path)))
    finally:
        verifier.close()
    assert control.passed, control.details
    assert not plain.passed
