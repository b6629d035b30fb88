"""Isolation detection, the per-slot uid, rlimits inside the child, the fallbacks and the refusal to run unisolated."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from dare.harness.errors import SandboxError
from dare.harness.sandbox import Limits, Sandbox, decode, detect, encode
from dare.harness.verifiers.code import CodeVerifier

PROBE = """
import os, resource, socket
def probe():
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=0.5)
        net = "open"
    except OSError:
        net = "blocked"
    limits = [resource.getrlimit(r)[0] for r in (resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE,
                                                  resource.RLIMIT_NOFILE, resource.RLIMIT_CORE)]
    return {"uid": os.getuid(), "env": sorted(os.environ), "net": net, "limits": limits, "pid": os.getpid()}
"""


def run_probe(sandbox: Sandbox) -> dict:
    job = {"mode": "call", "program": PROBE, "entry_point": "probe", "inputs": [encode([[], {}])], "limits": [5.0],
           "load_limit": 5.0}
    outcome = sandbox.run_job(job, 20)
    record = next(r for r in outcome.records if r.get("i") == 0)
    return dict(decode(record["ok"]).items())


def test_detection_finds_bubblewrap_and_records_it():
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    iso = detect()
    assert iso.backend == "bwrap" and iso.bwrap_version
    sandbox = Sandbox(workers=2, limits=Limits(address_space=768 << 20))
    try:
        described = sandbox.describe()
        assert described["backend"] == "bwrap" and not described["unsafe_local_exec"]
        assert any(layer.startswith("bubblewrap") for layer in described["layers"])
        facts = run_probe(sandbox)
    finally:
        sandbox.close()
    assert facts["net"] == "blocked"
    assert "DARE_CACHE_DIR" not in facts["env"] and "HOME" in facts["env"] and len(facts["env"]) < 16
    assert facts["limits"][0] == 768 << 20 and facts["limits"][1:] == [32, 16 << 20, 256, 0]
    if os.geteuid() == 0:
        assert iso.uid_base <= facts["uid"] < iso.uid_base + 2
        assert facts["pid"] < 10  # a fresh pid namespace


def test_unshare_fallback_runs_and_isolates_the_network():
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    iso = dataclasses.replace(detect(), backend="unshare")
    sandbox = Sandbox(workers=1, isolation=iso)
    try:
        facts = run_probe(sandbox)
        assert "unshare" in " ".join(sandbox.describe()["layers"])
    finally:
        sandbox.close()
    assert facts["net"] == "blocked"


def test_no_isolation_is_refused_with_the_fix(monkeypatch):
    none = dataclasses.replace(detect(), backend="none")
    with pytest.raises(SandboxError,
                       match="apt-get install bubblewrap.*--unsafe-local-exec .unsafe_local_exec=True in Python"):
        Sandbox(isolation=none)
    monkeypatch.setattr("dare.harness.sandbox.pool.detect", lambda uid_base: none)
    with pytest.raises(SandboxError):
        CodeVerifier("humaneval")


def test_unsafe_local_exec_runs_and_says_so(monkeypatch, tmp_path):
    none = dataclasses.replace(detect(), backend="none")
    monkeypatch.setattr("dare.harness.sandbox.pool.detect", lambda uid_base: none)
    verifier = CodeVerifier("humaneval", unsafe_local_exec=True, workers=1, cache_dir=tmp_path)
    try:
        described = verifier.describe()
        assert described["unsafe_local_exec"] is True and described["backend"] == "none"
        assert "no namespaces" in described["layers"]
        from dare.harness.data import load_samples

        sample = load_samples("humaneval.jsonl")[0]
        assert verifier.verify(sample, verifier.gold_completion(sample)).passed
        assert not verifier.verify(sample, "    return True\n").passed
    finally:
        verifier.close()


def test_unknown_dataset_is_a_config_error():
    from dare.harness.errors import ConfigError

    with pytest.raises(ConfigError, match="humaneval"):
        CodeVerifier("humaneval-x")


LITTER = """
import os, subprocess
def litter():
    open("/tmp/left-behind", "w").write("x")
    if os.fork() == 0:
        os.setsid()
        import time
        time.sleep(60)
        os._exit(0)
    return True
"""

INSPECT = """
import os
def inspect():
    return sorted(os.listdir("/tmp")), len([p for p in os.listdir("/proc") if p.isdigit()])
"""


def test_warm_server_leaves_nothing_from_one_sample_to_the_next():
    if detect().backend != "bwrap":
        pytest.skip("warm servers run only inside bubblewrap")
    sandbox = Sandbox(workers=1)
    try:
        assert sandbox.warm
        for program, entry in ((LITTER, "litter"), (INSPECT, "inspect")):
            job = {"mode": "call", "program": program, "entry_point": entry, "inputs": [encode([[], {}])],
                   "limits": [5.0], "load_limit": 5.0}
            outcome = sandbox.run_job(job, 20)
        tmp_entries, processes = decode(next(r for r in outcome.records if r.get("i") == 0)["ok"])
    finally:
        sandbox.close()
    assert tmp_entries == []
    assert processes <= 3  # bwrap's init, the server, this job: the sleeper of the previous sample is gone


def test_fresh_sandbox_per_sample_mode(tmp_path):
    if detect().backend != "bwrap":
        pytest.skip("needs bubblewrap")
    from dare.harness.data import load_samples

    sample = load_samples("humaneval.jsonl")[0]
    verifier = CodeVerifier("humaneval", workers=1, cache_dir=tmp_path, fresh_sandbox_per_sample=True,
                            min_time_limit=0.5, sample_time_limit=2, load_time_limit=1)
    try:
        assert not verifier.sandbox.warm and "a new sandbox per sample" in verifier.describe()["layers"]
        verdicts = verifier.verify_batch([(sample, verifier.gold_completion(sample)), (sample, "    return True\n"),
                                          (sample, "    while True:\n        pass\n")])
    finally:
        verifier.close()
    assert [v.passed for v in verdicts] == [True, False, False]
    assert verdicts[2].details["failure"] == "timeout"
