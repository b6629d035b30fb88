"""Countdown verifier: an arithmetic expression that uses every given number exactly once and equals the target.

Rules (each is tested in tests/harness/test_verifier_countdown.py):
- The expression is the last ``<answer>`` block (a ``\\boxed{}`` inside it wins, for d1's prompt), else
  the last box. No answer -> fail with ``details["reason"] = "no_answer"``.
- Cosmetic forms are normalised first: ``$``, ``\\times``/``\\cdot``/``×`` -> ``*``, ``\\div``/``÷`` -> ``/``,
  ``−`` -> ``-``, ``\\left``/``\\right``, and ``[]``/``{}`` brackets -> parentheses.
- A trailing ``= <target>`` is tolerated (DARE's prompt asks to omit it, models often write it anyway and
  it adds no information); any other ``=`` is a format failure.
- Parsed with :mod:`ast` (never eval). Allowed: integer literals, binary + - * /, unary minus, parentheses.
  The multiset of literals must equal the given numbers (each exactly once, no extra constants).
- Evaluated exactly with :class:`fractions.Fraction`; division by zero fails; passes when
  ``|value - target| < 1e-5``.
- ``score`` is 1.0 or 0.0. DARE's RL reward also gives 0.1 for any extracted answer that misses; that is a
  separate format term (:meth:`CountdownVerifier.reward`), not folded into the score. ``details["format_ok"]``
  says whether the expression was valid and used the numbers.
"""

from __future__ import annotations

import ast
import itertools
import logging
import operator
import re
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..options import NoOptions
from ..pyast import parse
from ..records import Sample, Verdict
from .base import Verifier
from .extract import extract_tagged_answer

log = logging.getLogger(__name__)

TOLERANCE = 1e-5
MAX_EXPRESSION_CHARS = 500
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_REWRITES = [
    (re.compile(r"\\left|\\right|\\[,;!]|\$"), ""),
    (re.compile(r"\\times|\\cdot|×|·"), "*"),
    (re.compile(r"\\div|÷"), "/"),
    (re.compile(r"−|–"), "-"),
    (re.compile(r"[\[{]"), "("),
    (re.compile(r"[\]}]"), ")"),
]
_TRAILING_EQUALS = re.compile(r"=\s*(-?\d+(?:\.\d+)?)\s*\.?\s*$")


class ExpressionError(ValueError):
    """The answer is not an allowed arithmetic expression (the message says why)."""


def normalize_expression(text: str) -> str:
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return text.strip().rstrip(".").strip()


def _evaluate(node: ast.AST, literals: list[int]) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        literals.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left, literals), _evaluate(node.right, literals)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ExpressionError("division by zero")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, literals)
    raise ExpressionError(f"{type(node).__name__} is not allowed (only integers, + - * / and parentheses)")


def evaluate_expression(expression: str) -> tuple[Fraction, list[int]]:
    """Exact value of an allowed expression and the integer literals it uses; raises ExpressionError."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = parse(expression, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ExpressionError(f"not an arithmetic expression ({type(exc).__name__})") from exc
    literals: list[int] = []
    try:
        return _evaluate(tree.body, literals), literals
    except RecursionError as exc:
        raise ExpressionError("expression nested too deeply") from exc


def check_expression(text: str, numbers: Sequence[int], target: int) -> dict[str, Any]:
    """Details of checking one answer: ``passed``, ``format_ok``, ``reason``, ``value``, ``expression``."""
    if len(text) > 2 * MAX_EXPRESSION_CHARS:  # before any regex, so a huge answer costs nothing
        return {"expression": text[:80] + "...", "passed": False, "format_ok": False, "reason": "invalid_expression",
                "error": f"answer longer than {2 * MAX_EXPRESSION_CHARS} characters"}
    expression = normalize_expression(text)
    trailing = _TRAILING_EQUALS.search(expression)
    if trailing and Fraction(trailing.group(1)) == target:
        expression = expression[: trailing.start()].strip()
    out: dict[str, Any] = {"expression": expression, "passed": False, "format_ok": False}
    if "=" in expression:
        return {**out, "reason": "equals_sign"}
    try:
        value, literals = evaluate_expression(expression)
    except ExpressionError as exc:
        return {**out, "reason": "invalid_expression", "error": str(exc)}
    out["value"] = str(value)
    if Counter(literals) != Counter(numbers):
        return {**out, "reason": "wrong_numbers", "used": literals}
    out["format_ok"] = True
    if abs(value - target) >= TOLERANCE:
        return {**out, "reason": "wrong_value"}
    return {**out, "passed": True, "reason": "correct"}


def _sample_numbers(sample: Sample) -> tuple[list[int], int]:
    numbers = [int(n) for n in sample.metadata["numbers"]]
    target = int(sample.metadata.get("target", sample.reference))
    return numbers, target


def solve(numbers: Sequence[int], target: int) -> str | None:
    """An expression using every number once that equals ``target``, or None when none exists.

    Search by repeatedly combining two of the remaining values with + - * / in both orders; this covers
    every operator choice, order and parenthesisation. Values are exact fractions.
    """
    def search(items: tuple[tuple[Fraction, str], ...]) -> str | None:
        if len(items) == 1:
            return items[0][1] if items[0][0] == target else None
        for i, j in itertools.combinations(range(len(items)), 2):
            (a, ea), (b, eb) = items[i], items[j]
            rest = tuple(items[k] for k in range(len(items)) if k not in (i, j))
            candidates = [(a + b, f"({ea} + {eb})"), (a * b, f"({ea} * {eb})"),
                          (a - b, f"({ea} - {eb})"), (b - a, f"({eb} - {ea})")]
            if b != 0:
                candidates.append((a / b, f"({ea} / {eb})"))
            if a != 0:
                candidates.append((b / a, f"({eb} / {ea})"))
            for value, text in candidates:
                found = search(rest + ((value, text),))
                if found is not None:
                    return found
        return None

    found = search(tuple((Fraction(n), str(n)) for n in numbers))
    if found is not None and found.startswith("(") and found.endswith(")") and len(numbers) > 1:
        found = found[1:-1]  # the outermost pair is always redundant
    return found


class CountdownVerifier(Verifier):
    """Exact Countdown checking. It has no options (any given is refused)."""

    name = "countdown"
    version = "1"
    Options = NoOptions

    def verify(self, sample: Sample, completion: str) -> Verdict:
        numbers, target = _sample_numbers(sample)
        found = extract_tagged_answer(completion)
        if found.answer is None:
            return Verdict(score=0.0, passed=False, answer=None,
                           details={"extraction": "none", "reason": "no_answer", "format_ok": False})
        details = check_expression(found.answer, numbers, target)
        details["extraction"] = found.method
        passed = details.pop("passed")
        return Verdict(score=float(passed), passed=passed, answer=details["expression"], details=details)

    def reward(self, verdict: Verdict) -> float:
        # DARE's (TinyZero's) Countdown reward: 1 for a solve, 0.1 for any answer that misses, 0 without one.
        if verdict.passed:
            return 1.0
        return 0.0 if verdict.answer is None else 0.1

    def verify_batch(self, items: Sequence[tuple[Sample, str]]) -> list[Verdict]:
        # A check takes microseconds (the expression length is capped), so a process pool would only add cost.
        return [self.verify(sample, completion) for sample, completion in items]

    def gold_completion(self, sample: Sample) -> str | None:
        numbers, target = _sample_numbers(sample)
        expression = solve(numbers, target)
        if expression is None:
            log.warning("countdown sample %s has no solution: %s -> %s", sample.id, numbers, target)
            return None
        return f"<answer>\n{expression}\n</answer>"

    def describe(self) -> dict[str, Any]:
        return {"evaluation": "ast whitelist, exact fractions", "tolerance": TOLERANCE,
                "trailing_equals_target": "tolerated"}
