"""Test plans: the trusted (inputs, expected outputs, oracle) lists for one task, and how they are built.

A plan is computed once per task from trusted material only (the dataset's tests and reference solution),
in the verifier's *trusted* pool, whose sandboxes never run a candidate's code (``Sandbox.trusted_twin``).
Every record of a reference run is validated before use (types, test-site indices, counts): a malformed
one makes the plan unusable, never crashes the parent. Plans are cached on disk under a key made of the
data row, the reference's hash, the verifier version and a hash of the code that builds plans; each file
names its key and a sha256 of its content, both checked on read (a mismatch rebuilds the plan). The
cache lives under the run's cache directory by default (``DARE_CACHE_DIR``), in a directory only the
harness user can read. A plan also keeps the reference's time per input, from which each test's time
limit is scaled (as EvalPlus does), and whether the reference passed its own tests.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import math
import os
import platform
import sys
from pathlib import Path
from typing import Any

from .assert_tests import rewrite
from .codec import CodecError, decode
from .pool import Sandbox

log = logging.getLogger(__name__)
PLAN_VERSION = "3"
CACHE_FORMAT = "dare-code-plan/1"
MAX_PLAN_RECORDS = 200_000  # calls recorded from one task's tests; far above any benchmark's
PLAN_CODE = ("plans.py", "assert_tests.py", "datasets.py", "evalplus_inputs.py", "codec.py", "child_runner.py")
REFERENCE_LIMIT_S = 20.0  # per reference call while building a plan
REFERENCE_TOTAL_S = 300.0


@dataclasses.dataclass
class TestPlan:
    """Per test ``i``: ``calls[i]`` = wire ``[args, kwargs]``, ``expected[i]`` (wire, or None), ``oracles[i]``
    (a key of ``compare.ORACLES``, "judge", or "raises"), ``ref_times[i]`` (seconds or None).
    ``judge``: ``{"program", "test"}`` when the tests must be re-run on replayed outputs. ``setup``: test
    set-up code (no asserts) run after the program when inputs are objects, given as ``{"expr": source}``.
    ``base_count``: how many leading calls are the dataset's base inputs (EvalPlus checks base and plus
    inputs as two runs, each with its own time budget); None where a dataset has no such split."""

    entry_point: str
    calls: list
    expected: list
    oracles: list
    ref_times: list
    atol: float = 0.0
    judge: dict | None = None
    setup: str = ""
    golden: dict = dataclasses.field(default_factory=lambda: {"passed": True, "reason": None})
    base_count: int | None = None

    @functools.cached_property
    def expected_bytes(self) -> list[int]:
        """Size of each expected output on the wire: a correct answer's record is about as large."""
        return [0 if e is None else len(json.dumps(e, separators=(",", ":"))) for e in self.expected]

    @functools.cached_property
    def call_bytes(self) -> list[int]:
        """Size of each test's input plus its expected output on the wire: what one step decodes and ships."""
        inputs = [len(json.dumps(c, separators=(",", ":"))) for c in self.calls]
        return [i + e for i, e in zip(inputs, self.expected_bytes)]

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> TestPlan:
        if type(data) is not dict or set(data) - {f.name for f in dataclasses.fields(cls)}:
            raise PlanError("not a test plan object")
        return validate_plan(cls(**data))


class PlanError(ValueError):
    """A reference record or a cached plan is malformed."""


def _wire(value: Any, what: str) -> Any:
    try:
        decode(value)
    except (CodecError, RecursionError, TypeError, ValueError) as exc:
        raise PlanError(f"{what}: {str(exc)[:120]}") from None
    return value


def _seconds(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) and math.isfinite(value) and value >= 0 else None


def validate_plan(plan: TestPlan) -> TestPlan:
    """Types and counts of every field (each wire value decodes); raises PlanError."""
    n = len(plan.calls) if type(plan.calls) is list else -1
    if type(plan.entry_point) is not str or not plan.entry_point.isidentifier():
        raise PlanError("entry point is not an identifier")
    if n < 0 or any(type(x) is not list or len(x) != n for x in (plan.expected, plan.oracles, plan.ref_times)):
        raise PlanError("calls, expected, oracles and ref_times differ in length")
    for call in plan.calls:
        if not (type(call) is dict and set(call) == {"expr"} and type(call["expr"]) is str):
            _wire(call, "test input")
    for value in plan.expected:
        if value is not None:
            _wire(value, "expected output")
    if any(type(o) is not str or len(o) > 64 for o in plan.oracles):
        raise PlanError("oracle names must be short strings")
    if any(t is not None and _seconds(t) is None for t in plan.ref_times):
        raise PlanError("reference times must be finite non-negative numbers")
    if type(plan.atol) not in (int, float) or _seconds(plan.atol) is None or type(plan.setup) is not str:
        raise PlanError("atol or setup has the wrong type")
    judge = plan.judge
    if judge is not None and not (type(judge) is dict and set(judge) == {"program", "test"}
                                  and all(type(v) is str for v in judge.values())):
        raise PlanError("judge must be {program, test} strings")
    if type(plan.golden) is not dict or type(plan.golden.get("passed")) is not bool:
        raise PlanError("golden must say whether the reference passed")
    if plan.base_count is not None and not (type(plan.base_count) is int and 0 <= plan.base_count <= n):
        raise PlanError("base_count must be None or a number of leading calls")
    return plan


def default_cache_dir() -> Path:
    """``$DARE_CACHE_DIR/code-plans``, else a directory private to this user under the system temp dir."""
    from ..cache import default_cache_root

    return default_cache_root() / "code-plans"


@functools.cache
def trusted_code_hash() -> str:
    """Hash of the code that builds plans: a change to it is a new plan version."""
    digest = hashlib.sha256()
    for name in PLAN_CODE:
        digest.update((Path(__file__).parent / name).read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def machine_fingerprint() -> str:
    """What the references' times depend on besides the code: CPU model and count, architecture, Python.
    Plans (and with them the time limits) are measured once per fingerprint, as EvalPlus times its ground
    truth once per machine."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "")
    except OSError:
        pass
    facts = [platform.machine(), model or platform.processor(), os.cpu_count(), platform.python_version()]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]


def plan_key(dataset: str, row: dict) -> str:
    """Data row, reference hash, verifier version (in ``dataset``), plan code, Python version and machine."""
    meta = row.get("metadata") or {}
    reference = json.dumps([row.get("reference"), meta.get("canonical_solution")], ensure_ascii=False)
    text = json.dumps([PLAN_VERSION, trusted_code_hash(), dataset, sys.version_info[:2], machine_fingerprint(),
                       hashlib.sha256(reference.encode("utf-8")).hexdigest(), row], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _digest(plan_json: dict) -> str:
    text = json.dumps(plan_json, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


class PlanCache:
    """One JSON file per plan (``{format, key, sha256, plan}``) under a directory only the harness user can
    read and write (children run as other uids and never see it)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def get(self, key: str) -> TestPlan | None:
        path = self.root / f"{key}.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("plan cache %s unreadable (%s): rebuilding it", path, exc)
            return None
        try:
            if type(data) is not dict or data.get("format") != CACHE_FORMAT or data.get("key") != key:
                raise PlanError("not the plan of this key")
            if data.get("sha256") != _digest(data.get("plan")):
                raise PlanError("content does not match its checksum")
            return TestPlan.from_json(data["plan"])
        except (PlanError, TypeError) as exc:
            log.warning("plan cache %s rejected (%s): rebuilding it", path, exc)
            return None

    def put(self, key: str, plan: TestPlan) -> None:
        plan_json = validate_plan(plan).to_json()
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)
        tmp = self.root / f".{key}.{os.getpid()}.{id(plan)}.tmp"
        record = {"format": CACHE_FORMAT, "key": key, "sha256": _digest(plan_json), "plan": plan_json}
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as stream:
            stream.write(json.dumps(record, separators=(",", ":")))
        os.replace(tmp, self.root / f"{key}.json")


def _call_record(record: dict, n: int) -> int:
    """Index of a well-formed ``{"i", "ok" | "err" | "timeout", "t"}`` record; raises PlanError."""
    index = record.get("i")
    if type(index) is not int or not 0 <= index < n:
        raise PlanError(f"input index {str(index)[:20]} out of range")
    if "ok" in record:
        _wire(record["ok"], f"output of input {index}")
    elif not (type(record.get("err")) is str or record.get("timeout") is True):
        raise PlanError(f"record of input {index} has no output")
    return index


def _site_record(record: dict, n: int) -> int:
    """Site of a well-formed ``{"site", "args", "ok" | "err", "t"}`` record; raises PlanError."""
    site = record.get("site")
    if type(site) is not int or not 0 <= site < n:
        raise PlanError(f"test site {str(site)[:20]} out of range")
    _wire(record.get("args"), f"arguments at site {site}")
    if "ok" in record:
        _wire(record["ok"], f"output at site {site}")
    elif type(record.get("err")) is not str:
        raise PlanError(f"record at site {site} has no output")
    return site


def reference_calls(sandbox: Sandbox, program: str, entry_point: str, calls: list) -> tuple[list, str | None]:
    """Run a trusted reference on every call; returns (one record or None per call, problem or None)."""
    job = {"mode": "call", "program": program, "entry_point": entry_point, "inputs": calls,
           "limits": [REFERENCE_LIMIT_S] * len(calls), "load_limit": REFERENCE_LIMIT_S}
    outcome = sandbox.run_job(job, min(REFERENCE_TOTAL_S, REFERENCE_LIMIT_S * (len(calls) + 1)) + 10)
    by_index: list = [None] * len(calls)
    problem = outcome.protocol_error
    for record in outcome.records:
        if "load_error" in record:
            problem = f"reference failed to load: {str(record['load_error'])[:80]}: {str(record.get('msg', ''))[:300]}"
        elif "i" in record:
            try:
                index = _call_record(record, len(calls))
            except PlanError as exc:
                return [None] * len(calls), f"malformed reference record: {exc}"
            if by_index[index] is not None:
                return [None] * len(calls), f"malformed reference record: input {index} answered twice"
            by_index[index] = record
        elif not (record.get("ready") is True or "done" in record):
            return [None] * len(calls), "malformed reference record: unknown kind"
    late = next((k for k, r in enumerate(by_index) if r is None or "timeout" in r), None)
    if problem is None and late is not None:
        timed_out = outcome.child.timed_out or (by_index[late] is not None)
        problem = f"reference {'timed out' if timed_out else 'stopped'} on input {late}"
    return by_index, problem


def plan_from_calls(sandbox: Sandbox, program: str, entry_point: str, calls: list, oracles: list,
                    atol: float, base_count: int | None = None) -> TestPlan:
    """Expected outputs computed by running the reference on each input (MBPP+, HumanEval+), as EvalPlus does.

    Inputs on which the reference itself raises (for instance MemoryError, or an output over the size cap)
    have no expected output; they are dropped, and the plan's ``golden`` says how many and why.
    ``base_count``: the first calls that are base inputs; the plan's own count is of those kept."""
    records, problem = reference_calls(sandbox, program, entry_point, calls)
    kept, expected, kept_oracles, times, dropped = [], [], [], [], {}
    kept_base = None if base_count is None else 0
    for k, (call, oracle, record) in enumerate(zip(calls, oracles, records)):
        if record is not None and "ok" in record:
            if kept_base is not None and k < base_count:
                kept_base += 1
            kept.append(call)
            expected.append(record["ok"])
            kept_oracles.append(oracle)
            times.append(_seconds(record.get("t")))
        elif record is not None and "err" in record:
            dropped[record["err"]] = dropped.get(record["err"], 0) + 1
    if not kept and problem is None:
        problem = "the reference produced no expected output for any input"
    golden = {"passed": problem is None, "reason": problem}
    if dropped:
        golden["dropped_inputs"] = dropped
    if problem is not None:  # keep the inputs the reference never reached: the plan stays complete
        return TestPlan(entry_point, calls, [r["ok"] if r and "ok" in r else None for r in records],
                        oracles, [_seconds(r.get("t")) if r else None for r in records], atol, None, "", golden,
                        base_count)
    return TestPlan(entry_point, kept, expected, kept_oracles, times, atol, None, "", golden, kept_base)


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
    final: dict[str, Any] = {"passed": False, "err": "NoResult",
                             "msg": outcome.protocol_error or "child gave no verdict"}
    try:
        if len(outcome.records) > MAX_PLAN_RECORDS:
            raise PlanError(f"more than {MAX_PLAN_RECORDS} records")
        for record in outcome.records:
            if "site" in record:
                kind = rewritten.site_kinds[_site_record(record, len(rewritten.site_kinds))]
                calls.append(record["args"])
                expected.append(record.get("ok"))
                oracles.append("raises" if "err" in record else kind)
                times.append(_seconds(record.get("t")))
            elif type(record.get("passed")) is bool:
                final = record
            else:
                raise PlanError("unknown kind")
    except PlanError as exc:
        return TestPlan(entry_point, [], [], [], [], 0.0, None, "",
                        {"passed": False, "reason": f"malformed reference record: {exc}"})
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
