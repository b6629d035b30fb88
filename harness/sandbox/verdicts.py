"""Deciding one candidate run, record by record, in the trusted parent.

:class:`Outcome` consumes the child's result records as they stream in (``accept`` is the launcher's
callback), decodes each output strictly, applies the plan's oracle, and asks the launcher to stop the
child at the first failure. A pass needs a well-formed record for every test, in order: a child that
exits early, prints fake markers, floods its output or forges out-of-order records fails.
"""

from __future__ import annotations

from typing import Any

from .codec import CodecError, decode
from .compare import ORACLES
from .plans import TestPlan
from .pool import JobOutcome

INPUT_PREVIEW = 200
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
                return self._fail(kind, error=str(record["load_error"])[:80], message=str(record.get("msg"))[:300])
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
            name = str(record["err"])[:80]
            self.outputs.append((False, name))
            if oracle == "raises" or oracle == "judge":
                self.passed_tests += oracle == "raises"
                return True
            return self._fail(ERROR_KINDS.get(name, "runtime_error"), index, error=name, message=str(record.get("msg"))[:300])
        if "ok" not in record:
            return self._fail("protocol", index, error="result record without output")
        try:
            value = decode(record["ok"])
        except CodecError as exc:
            return self._fail("protocol", index, error=str(exc)[:200])
        self.outputs.append((True, value))
        if oracle == "judge":
            return True
        expected = self.plan.expected[index]
        if oracle == "raises" or not ORACLES[oracle](value, decode(expected) if expected is not None else None,
                                                    self.plan.atol):
            return self._fail("wrong_answer", index, output=_preview(record["ok"]))
        self.passed_tests += 1
        return True

    def details(self) -> dict[str, Any]:
        out = {"tests_total": len(self.plan.calls), "tests_run": len(self.outputs), "tests_passed": self.passed_tests,
               "failure": self.failure}
        if self.first_failure:
            out["first_failure"] = self.first_failure
        if self.plan.judge is not None:
            out["judged_separately"] = True
        return out


def _preview(wire: Any) -> str:
    text = repr(wire)
    return text if len(text) <= INPUT_PREVIEW else text[:INPUT_PREVIEW] + "..."


def outcome_from_run(outcome: Outcome, run: JobOutcome) -> None:
    """Close the decision once the child is gone."""
    if run.protocol_error and outcome.failure is None:
        outcome._fail("output_limit" if "cap" in run.protocol_error else "protocol", error=run.protocol_error)
    if outcome.failure is None and not outcome.finished:
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
        outcome._fail("wrong_answer", None, error=reason[:300])
    else:
        outcome.passed_tests = len(outcome.plan.calls)
