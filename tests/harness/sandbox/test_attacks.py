"""The attack suite: every hostile program is graded fail, the host is unchanged, the verifier keeps working.

Runs the real verifier with the real isolation (bubblewrap as root here and in CI). Attacks are graded in
one parallel batch, interleaved with the gold solution, which must still pass next to each of them.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from dare.harness.data import load_samples
from dare.harness.verifiers.code import CodeVerifier

from .attacks import ATTACKS, render

SECRET_NAME = "DARE_ATTACK_TEST_SECRET"
UID_BASE = 61000
WORKERS = 2


def slot_processes() -> list[int]:
    """Pids of live processes owned by the sandbox's per-slot uids."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        uid_line = next((line for line in status.splitlines() if line.startswith("Uid:")), "Uid: -1")
        if UID_BASE <= int(uid_line.split()[1]) < UID_BASE + WORKERS:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade every attack once (module scope: the batch is the expensive part)."""
    canary_dir = tmp_path_factory.mktemp("canary")
    canary = canary_dir / "canary.txt"
    canary.write_text("intact")
    cache = tmp_path_factory.mktemp("plan-cache")
    secret = secrets.token_hex(16)
    os.environ[SECRET_NAME] = secret
    env_before = dict(os.environ)
    sibling = subprocess.Popen(["sleep", "300"])
    sample = next(s for s in load_samples("humaneval.jsonl") if s.id == "HumanEval/0")
    verifier = CodeVerifier("humaneval", workers=WORKERS, cache_dir=cache, min_time_limit=0.5, sample_time_limit=3,
                            load_time_limit=1.5, memory_mb=512, uid_base=UID_BASE)
    try:
        gold = verifier.gold_completion(sample)
        names = sorted(ATTACKS)
        items = []
        for name in names:
            items += [(sample, render(name, str(canary), SECRET_NAME, str(cache))), (sample, gold)]
        start = time.monotonic()
        verdicts = verifier.verify_batch(items)
        elapsed = time.monotonic() - start
        after_gold = verifier.verify(sample, gold)
        described = verifier.describe()
        verifier.close()  # stops the warm servers: after this no process of the slot uids may remain
        leftovers = slot_processes()
        for _ in range(20):
            if not leftovers:
                break
            time.sleep(0.1)
            leftovers = slot_processes()
        yield {"names": names, "attacks": verdicts[0::2], "golds": verdicts[1::2], "after_gold": after_gold,
               "canary": canary, "secret": secret, "env_before": env_before, "sibling": sibling,
               "leftovers": leftovers, "elapsed": elapsed, "describe": described}
    finally:
        verifier.close()
        sibling.kill()
        sibling.wait()
        os.environ.pop(SECRET_NAME, None)


def test_suite_is_large_enough():
    assert len(ATTACKS) >= 25


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_graded_fail_and_achieves_nothing(graded, name):
    verdict = graded["attacks"][graded["names"].index(name)]
    assert verdict.status == "scored", verdict.details
    assert verdict.passed is False and verdict.score == 0.0, verdict.details
    text = json.dumps(verdict.details)
    assert "LEAK" not in text, text
    assert graded["secret"] not in text


def test_gold_still_passes_next_to_every_attack(graded):
    failures = [n for n, v in zip(graded["names"], graded["golds"]) if not v.passed]
    assert failures == []
    assert graded["after_gold"].passed


def test_host_is_unchanged(graded):
    canary: Path = graded["canary"]
    assert canary.read_text() == "intact"
    assert sorted(p.name for p in canary.parent.iterdir()) == ["canary.txt"]
    volatile = {"PYTEST_CURRENT_TEST"}
    assert {k: v for k, v in os.environ.items() if k not in volatile} == {
        k: v for k, v in graded["env_before"].items() if k not in volatile}
    assert graded["sibling"].poll() is None, "a sibling process of the harness was killed"
    assert graded["leftovers"] == [], "sandboxed processes outlived their sample"


def test_failure_kinds_are_specific(graded):
    kinds = {n: v.details.get("failure") for n, v in zip(graded["names"], graded["attacks"])}
    assert kinds["infinite_loop"] == "timeout"
    assert kinds["infinite_loop_at_import"] == "timeout"
    assert kinds["ignore_alarm_and_spin"] == "timeout"
    assert kinds["memory_bomb"] == "memory"
    assert kinds["recursion_bomb"] == "recursion"
    assert kinds["os_exit_before_tests"] in ("load_error", "crash")
    assert kinds["sys_exit_before_tests"] == "load_error"
    assert kinds["eq_spoof_object"] == "unsupported_result_type"  # an object, not a builtin value


def test_isolation_is_recorded(graded):
    described = graded["describe"]
    assert described["unsafe_local_exec"] is False
    assert described["backend"] in ("bwrap", "unshare")
    if os.geteuid() == 0:
        assert described["uid_drop"] is True
