"""OlympiadBench's answer types through the math verifier, on the shipped rows that carry them.

Each case is a real row of olympiadbench.jsonl (its gold and metadata) and a prediction; the expected
verdicts follow OlympiadBench's own judge (OpenBMB/OlympiadBench, math_judger.py: comma-split answers
paired in any order with equal counts, ``abs(gold - pred) <= error * 1.01``), worked by hand.
"""

from __future__ import annotations

import pytest

from dare.harness.data import load_samples
from dare.harness.verifiers.answer_types import match_parts, rules_for, split_answers, strip_unit
from dare.harness.verifiers.math import MathVerifier

ROWS = {s.id: s for s in load_samples("olympiadbench.jsonl")}

CASES = [  # (row id, prediction, passes) -- the row's gold in the comment
    ("1664", r"\boxed{84, 69}", True),  # 69$,$84: several answers, any order
    ("1664", r"\boxed{69}", False),  # one of two answers
    ("1664", r"\boxed{69, 84, 85}", False),  # one answer too many
    ("1709", r"\boxed{1, 3, 3}", False),  # 1,3,5: a repeated answer cannot stand for two
    ("1800", r"\boxed{1 \text{ and } 3}", True),  # 1,3
    ("1800", r"\boxed{x=1, x=3}", True),
    ("1800", r"\boxed{\{3, 1\}}", True),
    ("1807", r"\boxed{\pm 2, 0}", True),  # -2,0,2
    ("1618", r"\boxed{(4,5,7),(1,8,19),(2,7,13)}", True),  # tuples, any order
    ("1618", r"\boxed{(8,1,19),(2,7,13),(4,5,7)}", False),  # inside a tuple the order counts
    ("1618", r"\boxed{(1,8,19),(2,7,13)}", False),
    ("1678", r"\boxed{(4,2)}", False),  # (2,4): one tuple, ordered
    ("1678", r"\boxed{(2, 4)}", True),
    ("2419", r"\boxed{166 cm^2}", True),  # unit cm^2
    ("2419", r"\boxed{166\text{ cm}^2}", True),
    ("2419", r"\boxed{167 cm^2}", False),
    ("2334", r"\boxed{\frac{41}{12}\text{ km}}", True),
    ("1760", r"\boxed{90^\circ, 90^\circ}", True),  # \angle BEA_1=90, \angle AEB_1=90 (degrees)
    ("1760", r"\boxed{90^\circ}", False),
    ("2592", r"\boxed{4.3}", True),  # 4.2 with error 1e-1: |4.3 - 4.2| = 0.1 <= 0.101
    ("2592", r"\boxed{4.25\%}", True),
    ("2592", r"\boxed{4.35}", False),  # 0.15 > 0.101
    ("1970", r"\boxed{(-\infty,0)\cup\{1\}}", True),  # the gold ends with a period
    ("1970", r"\boxed{(-\infty,0]\cup\{1\}}", False),
    ("2045", r"\boxed{t \in (0,4]}", True),  # gold t(0,4]: the variable is not part of the interval
    ("2045", r"\boxed{(0,4]}", True),
    ("2045", r"\boxed{(0,4)}", False),
    ("2410", r"\boxed{(\frac12, 8]}", False),  # [1/2, 8]: open and closed ends differ
    ("2410", r"\boxed{[0.5, 8]}", True),
]


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(workers=1)
    yield v
    v.close()


@pytest.mark.parametrize("row, prediction, passes", CASES)
def test_olympiadbench_answer_types(verifier, row, prediction, passes):
    sample = ROWS[f"olympiadbench/{row}"]
    verdict = verifier.verify(sample, prediction)
    assert verdict.status == "scored", verdict
    assert verdict.passed is passes, (sample.reference, sample.metadata.get("answer_type"), verdict.details)


def test_tolerance_and_unit_come_only_from_metadata(verifier):
    without = ROWS["olympiadbench/2592"].model_copy(update={"metadata": {}})
    assert verifier.verify(without, r"\boxed{4.3}").passed is False  # no stated tolerance: exact
    assert rules_for({"answer": "1"}) is None  # other benchmarks keep their rules
    rules = rules_for(ROWS["olympiadbench/2592"].metadata)
    assert rules.tolerance == 0.1 and rules.unit == "%" and not rules.multiple


def test_split_strip_and_matching():
    assert split_answers(r"(1,8,19), (2,7,13), [0,\frac{1}{2})") == ["(1,8,19)", "(2,7,13)", r"[0,\frac{1}{2})"]
    assert split_answers(r"\{1,2\}, 3") == [r"\{1,2\}", "3"]
    assert strip_unit("166 cm^2", "cm^2") == "166" and strip_unit("90^{\\circ}", "^{\\circ}") == "90"
    assert strip_unit("45\\ \\text{minutes}", "minutes") == "45" and strip_unit("cm^2", "cm^2") == "cm^2"
    # a greedy pairing takes a-x first and then finds nothing for b; the one-to-one pairing exists
    ok = {("a", "x"), ("a", "y"), ("b", "x")}
    assert match_parts(["a", "b"], ["x", "y"], lambda g, p: (g, p) in ok)
    assert not match_parts(["a", "b"], ["x", "x"], lambda g, p: (g, p) in ok and p == "x" and g == "a")
