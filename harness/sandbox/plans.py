"""Test plans: the trusted (inputs, expected outputs, oracle) lists for one task, and how they are built.

A plan is computed once per task from trusted material only (the dataset's tests and reference solution,
run in the same sandbox as candidates) and cached on disk by a hash of the data row, so the expected
outputs never depend on a candidate. It also keeps the reference's time per input, from which each
test's time limit is scaled (as EvalPlus does), and whether the reference passed its own tests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from .assert_tests import rewrite
from .pool import Sandbox

log = logging.getLogger(__name__)
PLAN_VERSION = "1"
REFERENCE_LIMIT_S = 20.0  # per reference call while building a plan
REFERENCE_TOTAL_S = 300.0


@dataclasses.dataclass
class TestPlan:
    """Per test ``i``: ``calls[i]`` = wire ``[args, kwargs]``, ``expected[i]`` (wire, or None), ``oracles[i]``
    (a key of ``compare.ORACLES``, "judge", or "raises"), ``ref_times[i]`` (seconds or None).
    ``judge``: ``{"program", "test"}`` when the tests must be re-run on replayed outputs. ``setup``: test
    set-up code (no asserts) run after the program when inputs are objects, given as ``{"expr": source}``."""

    entry_point: str
    calls: list
    expected: list
    oracles: list
    ref_times: list
    atol: float = 0.0
    judge: dict | None = None
    setup: str = ""
    golden: dict = dataclasses.field(default_factory=lambda: {"passed": True, "reason": None})

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> TestPlan:
        return cls(**data)


def default_cache_dir() -> Path:
    root = os.environ.get("DARE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dare")
    return Path(root) / "code-plans"


def plan_key(dataset: str, row: dict) -> str:
    text = json.dumps([PLAN_VERSION, dataset, sys.version_info[:2], row], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class PlanCache:
    """One JSON file per plan under a directory only the harness user can read (children run as other uids)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def get(self, key: str) -> TestPlan | None:
        path = self.root / f"{key}.json"
        try:
            return TestPlan.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def put(self, key: str, plan: TestPlan) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.root / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(plan.to_json(), separators=(",", ":")))
        os.replace(tmp, self.root / f"{key}.json")


def reference_calls(sandbox: Sandbox, program: str, entry_point: str, calls: list) -> tuple[list, str | None]:
    """Run a trusted reference on every call; returns (one record or None per call, problem or None)."""
    job = {"mode": "call", "program": program, "entry_point": entry_point, "inputs": calls,
           "limits": [REFERENCE_LIMIT_S] * len(calls), "load_limit": REFERENCE_LIMIT_S}
    outcome = sandbox.run_job(job, min(REFERENCE_TOTAL_S, REFERENCE_LIMIT_S * (len(calls) + 1)) + 10)
    by_index: list = [None] * len(calls)
    problem = outcome.protocol_error
    for record in outcome.records:
        if "load_error" in record:
            problem = f"reference failed to load: {record['load_error']}: {record.get('msg', '')}"
        elif type(record.get("i")) is int and 0 <= record["i"] < len(calls):
            by_index[record["i"]] = record
    late = next((k for k, r in enumerate(by_index) if r is None or "timeout" in r), None)
    if problem is None and late is not None:
        timed_out = outcome.child.timed_out or (by_index[late] is not None)
        problem = f"reference {'timed out' if timed_out else 'stopped'} on input {late}"
    return by_index, problem


def plan_from_calls(sandbox: Sandbox, program: str, entry_point: str, calls: list, oracles: list,
                    atol: float) -> TestPlan:
    """Expected outputs computed by running the reference on each input (MBPP+, HumanEval+ ref_func).

    Inputs on which the reference itself raises (for instance MemoryError, or an output over the size cap)
    have no expected output; they are dropped, and the plan's ``golden`` says how many and why."""
    records, problem = reference_calls(sandbox, program, entry_point, calls)
    kept, expected, kept_oracles, times, dropped = [], [], [], [], {}
    for call, oracle, record in zip(calls, oracles, records):
        if record is not None and "ok" in record:
            kept.append(call)
            expected.append(record["ok"])
            kept_oracles.append(oracle)
            times.append(record.get("t"))
        elif record is not None and "err" in record:
            dropped[record["err"]] = dropped.get(record["err"], 0) + 1
    if not kept and problem is None:
        problem = "the reference produced no expected output for any input"
    golden = {"passed": problem is None, "reason": problem}
    if dropped:
        golden["dropped_inputs"] = dropped
    if problem is not None:  # keep the inputs the reference never reached: the plan stays complete
        return TestPlan(entry_point, calls, [r["ok"] if r and "ok" in r else None for r in records],
                        oracles, [r.get("t") if r else None for r in records], atol, None, "", golden)
    return TestPlan(entry_point, kept, expected, kept_oracles, times, atol, None, "", golden)


def plan_from_asserts(sandbox: Sandbox, reference_program: str, entry_point: str, test_source: str,
                      call_after: str | None, judge_program: str, setup_source: str = "") -> TestPlan:
    """Convert assert-style tests: record every call of the tested function while the reference runs them.

    ``setup_source`` (MBPP's ``test_setup_code``, part of ``test_source`` too) is kept for tasks whose
    inputs are objects: the child then re-runs it after the candidate's program to build them."""
    rewritten = rewrite(test_source, entry_point, call_after)
    job = {"mode": "record", "program": reference_program, "entry_point": entry_point, "test": rewritten.source,
           "test_limit": REFERENCE_TOTAL_S, "seed": 0}
    outcome = sandbox.run_job(job, REFERENCE_TOTAL_S + 10)
    calls, expected, oracles, times = [], [], [], []
    final: dict[str, Any] = {"passed": False, "err": "NoResult", "msg": outcome.protocol_error or "child gave no verdict"}
    for record in outcome.records:
        if "site" in record:
            kind = rewritten.site_kinds[record["site"]]
            calls.append(record["args"])
            expected.append(record.get("ok"))
            oracles.append("raises" if "err" in record else kind)
            times.append(record.get("t"))
        elif "passed" in record:
            final = record
    reason = None if final.get("passed") else f"reference fails its tests: {final.get('err')}: {final.get('msg', '')}"
    setup = ""
    if any('{"x":' in json.dumps(c) for c in calls):  # inputs are objects: rebuild them in the child from source
        sites = [r["site"] for r in outcome.records if "site" in r]
        sources = rewritten.site_args
        if sites != list(range(len(sources))) or None in sources:
            reason = reason or "test inputs are objects that cannot be passed as data"
        else:
            calls, setup = [{"expr": src} for src in sources], setup_source
    judge = {"program": judge_program, "test": rewritten.source} if rewritten.needs_judge else None
    return TestPlan(entry_point, calls, expected, oracles, times, 0.0, judge, setup,
                    {"passed": reason is None, "reason": reason})
