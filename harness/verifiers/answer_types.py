"""OlympiadBench's answer types, applied by the math verifier to samples that carry them.

A sample opts in through its metadata (the fields of ``olympiadbench.jsonl``): ``answer_type``
(Numerical, Expression, Tuple, Interval), ``is_multiple_answer``, ``unit`` and ``error`` (a numerical
tolerance). Samples without these fields are graded exactly as before, so the other benchmarks' verdicts
do not change. The rules follow OlympiadBench's own judge (OpenBMB/OlympiadBench, ``math_judger.py``):

- several answers: gold and prediction are split at top-level commas (a comma inside ``()``, ``[]``,
  ``{}`` does not split, so tuples and intervals stay whole); the lists must have the same length and
  pair off one to one in any order;
- a stated unit may follow the value (``45 minutes``, ``166 cm^2``, ``90^\\circ``, ``4.2\\%``): it is removed
  before comparison, because the gold holds the bare value;
- a stated tolerance: a numerical answer within ``error`` of the gold (absolute) is right;
- intervals: a variable written before the interval (``t(0,4]``, ``x \\in [1,2)``) is not part of it;
- an equation part in the gold (``\\angle BEA_1 = 90``) also accepts its right-hand side.

The parent prepares the strings (:func:`rules_for`, :func:`clean_gold`, :func:`clean_answer`); the worker
compares them (:func:`match_parts`) with math-verify, inside the parent's deadline.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_OPEN, _CLOSE = "([{", ")]}"
_INTERVAL_VARIABLE = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?\s*(?:\\in\s*)?(?=[(\[])")
_AND = re.compile(r"\s*(?:\\text\s*\{\s*and\s*\}|\band\b)\s*")
_DEGREE = ("^{\\circ}", "^\\circ", "\\circ", "°", "\\degree")


@dataclass(frozen=True)
class AnswerRules:
    """What a sample's metadata says about its answer (see the module doc)."""

    multiple: bool = False
    tolerance: float | None = None
    unit: str | None = None
    interval: bool = False

    def worker_args(self) -> tuple[bool, float | None]:
        """The part of the rules the worker needs (plain data: it crosses a process pipe)."""
        return self.multiple, self.tolerance


def rules_for(metadata: Mapping[str, Any]) -> AnswerRules | None:
    """The rules a sample's metadata states, or None for a sample without answer-type fields."""
    if not any(k in metadata for k in ("answer_type", "is_multiple_answer", "unit", "error")):
        return None
    error = metadata.get("error")
    try:
        tolerance = float(error) if error not in (None, "") else None
    except (TypeError, ValueError):
        tolerance = None  # an unreadable tolerance grades exactly, never more leniently
    unit = str(metadata.get("unit") or "").replace("$", "").strip() or None
    return AnswerRules(multiple=bool(metadata.get("is_multiple_answer")), tolerance=tolerance, unit=unit,
                       interval=metadata.get("answer_type") == "Interval")


def split_answers(text: str) -> list[str]:
    """``"(1,2), (3,4)"`` -> ``["(1,2)", "(3,4)"]``: commas at bracket depth 0 only (``\\{`` counts)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def strip_unit(answer: str, unit: str | None) -> str:
    """Remove a trailing unit (bare, ``\\text{}``/``\\mathrm{}`` wrapped, or as a degree sign)."""
    if not unit:
        return answer
    compact = unit.replace(" ", "")
    forms = _DEGREE if compact in _DEGREE else (f"\\text{{{unit}}}", f"\\mathrm{{{unit}}}", unit, compact)
    if compact == "%":
        forms = ("\\%", "%")
    out = answer.rstrip()
    for form in forms:
        if (out.replace(" ", "").endswith(form.replace(" ", ""))
                and len(out.replace(" ", "")) > len(form.replace(" ", ""))):
            cut = _cut_suffix(out, form.replace(" ", ""))
            return re.sub(r"(\\[,;!]|~|\\ |\s)+$", "", cut)
    return out


def _cut_suffix(text: str, suffix: str) -> str:
    """``text`` without the trailing ``suffix``, where spaces inside ``text`` do not count."""
    i, j = len(text), len(suffix)
    while j > 0 and i > 0:
        i -= 1
        if text[i] == " ":
            continue
        j -= 1
    return text[:i]


def _clean(text: str, rules: AnswerRules) -> str:
    text = text.replace("$", "").strip()
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1].rstrip()  # "(-\infty, 0) \cup \{1\}." ends a sentence
    if rules.interval:
        text = _INTERVAL_VARIABLE.sub("", text)
    return text


def clean_gold(gold: str, rules: AnswerRules) -> str:
    """The gold as the comparison sees it: dollars and a final period dropped, several answers re-joined."""
    text = _clean(gold, rules)
    return ", ".join(split_answers(text)) if rules.multiple else text


def clean_answer(answer: str, rules: AnswerRules) -> str:
    """The prediction prepared the same way, with the unit removed from each answer."""
    text = _clean(answer, rules)
    if not rules.multiple:
        return strip_unit(text, rules.unit)
    if text.startswith("\\{") and text.endswith("\\}"):
        text = text[2:-2]  # a set of the answers: its elements are the answers
    text = _AND.sub(", ", text)
    return ", ".join(strip_unit(_clean(p, rules), rules.unit) for p in split_answers(text))


def match_parts(golds: list[str], preds: list[str], equal: Callable[[str, str], bool]) -> bool:
    """Whether the lists pair off one to one under ``equal`` (any order; augmenting paths, so a greedy
    early choice cannot hide a valid pairing)."""
    if len(golds) != len(preds):
        return False
    ok = [[equal(g, p) for p in preds] for g in golds]
    owner: list[int | None] = [None] * len(preds)

    def assign(g: int, seen: set[int]) -> bool:
        for p in range(len(preds)):
            if ok[g][p] and p not in seen:
                seen.add(p)
                if owner[p] is None or assign(owner[p], seen):  # type: ignore[arg-type]
                    owner[p] = g
                    return True
        return False

    return all(assign(g, set()) for g in range(len(golds)))
