"""Long-addition verifier (the generated task of :mod:`dare.harness.generators.long_addition`).

Rules (tested in tests/harness/test_long_addition.py):
- The answer is the last ``<answer>`` block (a ``\\boxed{}`` inside it wins), whitespace stripped. ``passed``
  (score 1.0) needs digits only whose integer value is ``a + b``; leading zeros are allowed.
- ``details["partial_credit"]``: the share of the sum's digits right, both sides zero-padded on the left to
  ``len(a) + 1`` digits (0 for a non-digit answer or one with more digits); 1.0 when passed.
- ``details["work_steps"]``: the share of the ``len(a) + 2`` reference work lines that the completion's
  work (the lines before the ``<answer>`` block) gets right *given its own line before*: line 0 must be the
  padded operands, line i the rule applied to the completion's line i-1. So one slip costs one step, not
  every step after it. The score never depends on the work: only the answer counts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..generators.long_addition import gold_completion, next_line
from ..options import NoOptions
from ..records import Sample, Verdict
from .base import Verifier
from .extract import extract_tagged_answer

_WHITESPACE = re.compile(r"\s+")


def _operands(sample: Sample) -> tuple[str, str]:
    return str(sample.metadata["a"]), str(sample.metadata["b"])


def digit_credit(answer: str, reference: str, width: int) -> float:
    """Share of the ``width`` left-zero-padded digits of ``answer`` equal to ``reference``'s."""
    if not answer.isdigit() or len(answer.lstrip("0")) > width:
        return 0.0
    got, ref = answer.lstrip("0").zfill(width), reference.zfill(width)
    return sum(g == r for g, r in zip(got, ref)) / width


def work_steps(completion: str, a: str, b: str) -> float:
    """Share of the work lines right given the completion's own previous line (see the module doc)."""
    width = len(a) + 1
    lines = [line.strip() for line in completion.split("<answer>")[0].splitlines() if line.strip()]
    steps = width + 1
    good = int(bool(lines) and lines[0] == f"{a.zfill(width)}+{b.zfill(width)}")
    for i in range(1, min(len(lines), steps)):
        column = width - i
        prev = lines[i - 1]
        if re.fullmatch(rf"[0-9]{{{width}}}\+[0-9.*]{{{width}}}", prev):
            try:
                good += lines[i] == next_line(prev, column)
            except ValueError:  # a mark where the rule needs a digit: the step cannot be right
                pass
    return good / steps


class LongAdditionVerifier(Verifier):
    """Exact sum, digit partial credit and a local check of every written step."""

    name = "long_addition"
    version = "1"
    Options = NoOptions

    def verify(self, sample: Sample, completion: str) -> Verdict:
        a, b = _operands(sample)
        reference = str(int(a) + int(b))
        steps = work_steps(completion, a, b)
        found = extract_tagged_answer(completion)
        if found.answer is None:
            return Verdict(score=0.0, passed=False, answer=None,
                           details={"extraction": "none", "partial_credit": 0.0, "work_steps": steps})
        answer = _WHITESPACE.sub("", found.answer)
        passed = answer.isdigit() and int(answer) == int(reference)
        credit = 1.0 if passed else digit_credit(answer, reference, len(a) + 1)
        details = {"extraction": found.method, "partial_credit": credit, "work_steps": steps}
        return Verdict(score=float(passed), passed=passed, answer=answer, details=details)

    def verify_batch(self, items: Sequence[tuple[Sample, str]]) -> list[Verdict]:
        # Microseconds per check: a process pool would only add cost.
        return [self.verify(sample, completion) for sample, completion in items]

    def gold_completion(self, sample: Sample) -> str | None:
        return gold_completion(*_operands(sample))

    def describe(self) -> dict[str, Any]:
        return {"exact": "integer value of the answer equals a + b",
                "partial_credit": "share of the zero-padded sum's digits right (1.0 when passed)",
                "work_steps": "share of written steps right given the line before"}
