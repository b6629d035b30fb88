"""Deciding one candidate run, record by record, in the trusted parent.

:class:`Outcome` consumes the child's result records as they stream in (``accept`` is the launcher's
callback), decodes each output strictly, applies the plan's oracle, and asks the launcher to stop the
child at the first failure. A pass needs a well-formed record for every test, in order: a child that
exits early, prints fake markers, floods its output or forges out-of-order records fails.

Everything a record holds is the candidate's: decoding and comparing it run bounded (see ``codec``), and
any failure on the way (a malformed value, a comparison that raises, ``10**400`` where a float is expected)
is that test's failure with its reason in ``details``, never an exception out of here.
"""

from __future__ import annotations

import reprlib
from typing import Any

from .codec import CodecError, decode
from .compare import ORACLES, EvalPlusRules, opaque_inside, rules_for
from .plans import TestPlan
from .pool import JobOutcome

INPUT_PREVIEW = 200
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple, _REPR.maxstring, _REPR.maxother = 6, 12, 12, 12, 80, 80
ERROR_KINDS = {"MemoryError": "memory", "RecursionError": "recursion"}


class Outcome:
    """The running decision for one candidate; ``passed`` is final once the run and judge are done."""

    def __init__(self, plan: TestPlan):
        self.plan = plan
        self.outputs: list[tuple[bool, Any]] = []  # (returned normally, decoded value or error name)
        self.passed_tests = 0
        self.loaded = False
        self.finished = False
        self.failure: str | None = None
        self.first_failure: dict[str, Any] | None = None
        self.passed = False
        self._rules: EvalPlusRules | None = None
        self._rules_group = 0

    def _fail(self, kind: str, index: int | None = None, **info: Any) -> bool:
        if self.failure is None:
            self.failure = kind
            self.first_failure = {"test": index, **info}
            if index is not None and 0 <= index < len(self.plan.calls):
                self.first_failure["input"] = _preview(self.plan.calls[index])
        return False

    def accept(self, record: dict) -> bool:
        """Launcher callback: True to keep reading, False to stop the child."""
        if not self.loaded:
            if record.get("ready") is True and len(record) == 1:
                self.loaded = True
                return True
            if "load_error" in record:
                kind = "syntax_error" if record["load_error"] in ("SyntaxError", "IndentationError") else "load_error"
                kind = "timeout" if record["load_error"] == "Timeout" else kind
                return self._fail(kind, error=_text(record["load_error"], 80), message=_text(record.get("msg"), 300))
            return self._fail("protocol", error="unexpected record before the program loaded")
        index = len(self.outputs)
        if "done" in record:
            self.finished = record == {"done": len(self.plan.calls)} and index == len(self.plan.calls)
            return True if self.finished else self._fail("protocol", error="incomplete or forged end record")
        if record.get("i") != index or type(record.get("i")) is not int or index >= len(self.plan.calls):
            return self._fail("protocol", index, error="out-of-order or extra result record")
        return self._accept_test(index, record)

    def _accept_test(self, index: int, record: dict) -> bool:
        oracle = self.plan.oracles[index]
        if record.get("timeout") is True:
            return self._fail("timeout", index)
        if "err" in record:
            name = _text(record["err"], 80)
            self.outputs.append((False, name))
            if oracle == "raises" or oracle == "judge":
                self.passed_tests += oracle == "raises"
                return True
            return self._fail(ERROR_KINDS.get(name, "runtime_error"), index, error=name,
                              message=_text(record.get("msg"), 300))
        if "ok" not in record:
            return self._fail("protocol", index, error="result record without output")
        try:
            value = decode(record["ok"])
        except CodecError as exc:
            return self._fail("bad_output", index, error=_text(exc, 200))
        if oracle == "raises":
            return self._fail("wrong_answer", index, output=_preview(record["ok"]), error="expected an exception")
        self.outputs.append((True, value))
        if oracle == "judge":
            return True
        expected = self.plan.expected[index]
        expected = decode(expected) if expected is not None else None  # trusted: a failure here is ours
        try:
            matched = self._compare(oracle, index, value, expected)
        except Exception as exc:  # the original test's assertion raises here too (ambiguous array, overflow...)
            return self._fail("wrong_answer", index, output=_preview(record["ok"]),
                              error=f"comparison raised {type(exc).__name__}")
        if not matched:  # a value of no builtin type (nor a subclass of one) is never equal to anything
            kind = "unsupported_result_type" if opaque_inside(value) else "wrong_answer"
            return self._fail(kind, index, output=_preview(record["ok"]))
        self.passed_tests += 1
        return True

    def _compare(self, oracle: str, index: int, value: Any, expected: Any) -> bool:
        if oracle in ORACLES:
            return ORACLES[oracle](value, expected)
        base_count = self.plan.base_count
        group = int(base_count is not None and index >= base_count)
        if self._rules is None or group != self._rules_group:  # plus inputs: a fresh process in EvalPlus, so
            self._rules_group = group                          # a float's atol set on base inputs does not stay
            self._rules = rules_for(oracle, self.plan.entry_point, self.plan.atol)
            if self._rules is None:
                raise KeyError(f"unknown oracle {oracle!r}")
        args = decode(self.plan.calls[index])[0]
        return self._rules.check(value, expected, list(args))

    def details(self) -> dict[str, Any]:
        out = {"tests_total": len(self.plan.calls), "tests_run": len(self.outputs), "tests_passed": self.passed_tests,
               "failure": self.failure}
        if self.first_failure:
            out["first_failure"] = self.first_failure
        if self.plan.judge is not None:
            out["judged_separately"] = True
        return out


def _preview(wire: Any) -> str:
    """A short, bounded rendering of wire data (reprlib never renders a whole large value)."""
    text = _REPR.repr(wire)
    return text if len(text) <= INPUT_PREVIEW else text[:INPUT_PREVIEW] + "..."


def _text(value: Any, limit: int) -> str:
    """A candidate-supplied message as safe text: bounded, and lone surrogates replaced (they cannot be written
    as UTF-8, and would break the run's own output files)."""
    text = value if type(value) is str else _REPR.repr(value) if not isinstance(value, BaseException) else str(value)
    return clean_text(text[:limit])


def clean_text(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if _has_surrogates(text) else text


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def outcome_from_run(outcome: Outcome, run: JobOutcome) -> None:
    """Close the decision once the child is gone."""
    if run.protocol_error and outcome.failure is None:
        outcome._fail("output_limit" if "cap" in run.protocol_error else "protocol",
                      error=_text(run.protocol_error, 300))
    if outcome.failure is None and (not outcome.finished or run.child.timed_out):  # alive at its deadline: no pass
        child = run.child
        if child.timed_out or child.returncode in (-24, -9):  # SIGXCPU: the CPU rlimit; SIGKILL: our deadline
            outcome._fail("timeout", len(outcome.outputs))
        else:
            outcome._fail("crash" if outcome.loaded else "load_error", len(outcome.outputs),
                          error=f"child exited with {child.returncode} before finishing",
                          stderr=child.stderr[-300:].decode("utf-8", "replace"))
    outcome.passed = outcome.failure is None and outcome.finished


def judge_outputs(outcome: Outcome, run: JobOutcome) -> None:
    """Apply the separate judge process's verdict (tests re-run on the replayed outputs)."""
    final = next((r for r in run.records if "passed" in r), None)
    if final is None or final.get("passed") is not True or len(run.records) != 1:
        outcome.passed = False
        reason = "judge gave no verdict" if final is None else f"{final.get('err')}: {final.get('msg', '')}"
        outcome._fail("wrong_answer", None, error=_text(reason, 300))
    else:
        outcome.passed_tests = len(outcome.plan.calls)
