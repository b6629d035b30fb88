"""Math verifier (GSM8K, MATH500, AIME, OlympiadBench, AMC23): answer extraction, then equivalence with math-verify.

Extraction (``extract.extract_math_answer``) runs in the parent; parsing and comparison run with
math-verify in worker processes whose deadline the parent enforces (math-verify's own ``signal.alarm``
timeout is disabled there: it only works in a main thread). A job over the deadline is a *scored*
failure with ``details["timeout"] = True``; a worker that dies is an infrastructure error
(``status="error"``).

Rules, per gold (each is tested):
- The gold is the reference string; a ``\\boxed{}`` inside it is unwrapped; a single number written with
  thousands separators (GSM8K "1,000", MATH "10,\\!080") loses them. The same applies to the prediction.
- Percentages follow math-verify and are gold-driven: a prediction "10\\%" matches a gold 10 (GSM8K drops
  the unit) and a gold 0.1 (same value); a gold "10\\%" accepts 10\\%, 10 and 0.1; a plain prediction is
  taken at face value, so 0.1 does *not* match a gold 10.
- Several boxes: the last one is the answer (hedging with two boxes is judged on the last).
- Prose inside ``<answer>`` or after ``####`` ("The answer is 18", "18 dollars") is read through an anchor
  phrase or, failing that, its only number; a hedge with several numbers ("42 or maybe 43") fails.
- Without box, tag or ``####``, the ``fallback`` option decides: ``"last_number"`` (default, lenient),
  ``"math_verify"`` (math-verify's own search of the whole text: "final answer" anchors first, then its
  last expression) or ``"none"`` (strict: no answer). ``details["strict"]`` is False when the answer came from a
  fallback, so strict accuracy can be reported beside lenient accuracy.
- A sample whose metadata states OlympiadBench's answer type (several answers, a unit, a tolerance, an
  interval) is graded by those rules as well (``answer_types``); math-verify's own verdict still counts.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import weakref
from collections.abc import Sequence
from importlib.metadata import version as _dist_version
from typing import Any, Literal

from pydantic import Field

from ..errors import ConfigError
from ..options import Options
from ..records import Sample, Verdict
from .answer_types import clean_answer, clean_gold, match_parts, rules_for, split_answers
from .base import Verifier
from .extract import Extraction, extract_math_answer, last_boxed, strip_thousands
from .worker_pool import DeadlinePool, JobResult

log = logging.getLogger(__name__)

FALLBACKS = ("last_number", "math_verify", "none")
_STRICT_METHODS = ("boxed", "answer_tag", "hash")
_LATEX_COMMAND = re.compile(r"\\(?:text|mathrm|textbf|mbox)\s*\{[^{}]*\}|\\[A-Za-z]+")
_WORD = re.compile(r"\b[A-Za-z]{2,}\b")
_NUMERAL = re.compile(r"\d")
_ANY_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def normalize_gold(reference: str) -> str:
    """The gold as an answer string: a boxed reference unwrapped, thousands separators dropped."""
    boxed = last_boxed(reference)
    return strip_thousands((boxed if boxed is not None else reference).strip())


def normalize_prediction(answer: str) -> str:
    """Cosmetic clean-up of an extracted answer before math-verify sees it."""
    answer = answer.strip().strip("$").strip()
    if answer.endswith(".") and not answer.endswith(".."):
        answer = answer[:-1].rstrip()  # "5." is a sentence end; math-verify would not parse it
    return strip_thousands(answer)


def reading_for(answer: str) -> str:
    """``"latex"`` for a bare mathematical answer (parsed as if boxed), ``"text"`` for prose such as
    ``"The answer is 5"`` or ``"18 dollars"`` (see :func:`_parse`)."""
    words = _WORD.findall(_LATEX_COMMAND.sub(" ", answer))
    if len(words) >= 2 or (words and _NUMERAL.search(answer)):
        return "text"
    return "latex"


@functools.cache
def _math_verify() -> Any:
    import math_verify

    # Timeouts are the parent's job; silence math-verify's one-time "timeout disabled" warning.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    return math_verify


def _read(text: str, reading: str) -> list:
    """math-verify's reading of an answer. ``latex``: as if boxed. ``text``: an anchored phrase ("the answer
    is 5") first; a sentence holding a single number ("18 dollars") next; else as if boxed, so a hedge such
    as "42 or maybe 43" is not read as its last number. ``search``: math-verify's own unanchored search."""
    mv = _math_verify()
    boxed = "\\boxed{" + text + "}"
    if reading == "latex":
        return mv.parse(boxed, parsing_timeout=None)
    if reading == "search":
        return mv.parse(text, parsing_timeout=None)
    anchored = [mv.LatexExtractionConfig(try_extract_without_anchor=False),
                mv.ExprExtractionConfig(try_extract_without_anchor=False)]
    found = mv.parse(text, anchored, parsing_timeout=None)
    if not found and len(_ANY_NUMBER.findall(text)) == 1:
        found = mv.parse(text, parsing_timeout=None)
    return found or mv.parse(boxed, parsing_timeout=None)


@functools.lru_cache(maxsize=4096)  # parsed values are never mutated, so sharing them is safe
def _parse_gold(gold: str) -> list:
    parsed = _read(gold, "latex")
    if not parsed:
        raise ValueError(f"math-verify cannot parse the gold answer {gold!r}")
    return parsed


@functools.lru_cache(maxsize=8192)  # RL groups and pass@k repeat answers
def _parse_prediction(answer: str, reading: str) -> list:
    return _read(answer, reading)


def grade(gold: str, answer: str, reading: str,
          rules: tuple[bool, float | None] | None = None) -> tuple[bool, str | None]:
    """Worker-side job: (equivalent?, the prediction as math-verify read it). Runs without timeouts.
    ``rules``: (several answers?, absolute tolerance) from the sample's answer type, or None."""
    predicted = _parse_prediction(answer, reading)
    ok = bool(predicted) and _math_verify().verify(_parse_gold(gold), predicted, timeout_seconds=None)
    if not ok and rules is not None:
        multiple, tolerance = rules
        if multiple:
            ok = match_parts(split_answers(gold), split_answers(answer),
                             lambda g, p: _part_equal(g, p, "latex", tolerance))
        else:
            ok = _part_equal(gold, answer, reading, tolerance)
    return ok, (str(predicted[-1]) if predicted else None)


def _part_equal(gold: str, answer: str, reading: str, tolerance: float | None) -> bool:
    """One answer against one gold: math-verify, then the tolerance; a gold equation also offers its
    right-hand side (OlympiadBench writes ``\\angle BEA_1 = 90`` where the value is the answer)."""
    mv = _math_verify()
    predicted = _parse_prediction(answer, reading)
    if not predicted:
        return False
    for candidate in (gold, gold.rsplit("=", 1)[1]) if "=" in gold else (gold,):
        try:
            parsed = _parse_gold(candidate.strip())
        except ValueError:
            continue
        if (mv.verify(parsed, predicted, timeout_seconds=None)
                or (tolerance is not None and _within(parsed, predicted, tolerance))):
            return True
    return False


def _within(gold: list, predicted: list, tolerance: float) -> bool:
    """|gold - prediction| <= tolerance * 1.01, both numbers (OlympiadBench's numerical_equal; the 1.01
    absorbs the float error of a difference such as 4.3 - 4.2)."""
    try:
        return abs(float(gold[0]) - float(predicted[0])) <= tolerance * 1.01
    except (TypeError, ValueError):
        return False


class MathOptions(Options):
    """``timeout`` (s per answer), ``fallback`` (see the module doc), ``workers`` (processes; execution
    only), ``memory_mb`` (per-worker address-space cap)."""

    execution_only = frozenset({"workers"})
    timeout: float = Field(10.0, gt=0)
    fallback: Literal["last_number", "math_verify", "none"] = "last_number"
    workers: int | None = None
    memory_mb: int | None = 4096


class MathVerifier(Verifier):
    """Options: ``timeout`` (s per answer, default 10), ``fallback`` (see module doc), ``workers``
    (processes, default min(4, cpus)), ``memory_mb`` (per-worker address-space cap, default 4096)."""

    name = "math"
    version = "1+math-verify-" + _dist_version("math-verify")
    Options = MathOptions

    def __init__(self, timeout: float = 10.0, fallback: str = "last_number", workers: int | None = None,
                 memory_mb: int | None = 4096, **options: Any):
        super().__init__(timeout=timeout, fallback=fallback, workers=workers, **options)
        if fallback not in FALLBACKS:
            raise ConfigError(f"math verifier: fallback {fallback!r} is not one of {', '.join(FALLBACKS)}")
        if not timeout or timeout <= 0:
            raise ConfigError(f"math verifier: timeout must be a positive number of seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self.fallback = fallback
        self.workers = workers or min(4, os.cpu_count() or 1)
        self.memory_mb = memory_mb
        self._pool: DeadlinePool | None = None

    @property
    def pool(self) -> DeadlinePool:
        if self._pool is None:
            self._pool = DeadlinePool(f"{__name__}:grade", self.workers, self.timeout,
                                      preload=("math_verify", __name__), memory_mb=self.memory_mb)
            weakref.finalize(self, self._pool.close)  # a forgotten close() still stops the workers
        return self._pool

    def extract(self, completion: str) -> Extraction:
        found = extract_math_answer(completion, "none" if self.fallback == "math_verify" else self.fallback)
        if not found.found and self.fallback == "math_verify":
            return Extraction(completion, "math_verify")
        return found

    def verify(self, sample: Sample, completion: str) -> Verdict:
        return self.verify_batch([(sample, completion)])[0]

    def verify_batch(self, items: Sequence[tuple[Sample, str]]) -> list[Verdict]:
        extractions = [self.extract(completion) for _, completion in items]
        rules = [rules_for(sample.metadata) for sample, _ in items]
        golds = [normalize_gold(sample.reference or "") for sample, _ in items]
        golds = [clean_gold(g, r) if r and g else g for g, r in zip(golds, rules)]
        jobs, slots, answers = [], [], {}
        for i, found in enumerate(extractions):
            if found.found and golds[i]:
                if found.method == "math_verify":  # the whole text goes to math-verify's own search
                    jobs.append((golds[i], found.answer, "search"))
                else:
                    answers[i] = normalize_prediction(found.answer)
                    if rules[i]:
                        answers[i] = clean_answer(answers[i], rules[i])
                    reading = "latex" if found.method == "boxed" else reading_for(answers[i])
                    jobs.append((golds[i], answers[i], reading, rules[i].worker_args() if rules[i] else None))
                slots.append(i)
        verdicts: list[Verdict | None] = [None] * len(items)
        for i, result in zip(slots, self.pool.map(jobs) if jobs else []):
            verdicts[i] = self._verdict(extractions[i], answers.get(i), golds[i], result)
        for i, found in enumerate(extractions):
            if verdicts[i] is None:
                status = "error" if not golds[i] else "scored"
                details = {"extraction": found.method, "strict": False, "gold": golds[i]}
                if not golds[i]:
                    details["error"] = f"sample {items[i][0].id!r} has no reference answer"
                verdicts[i] = Verdict(score=0.0, passed=False, answer=found.answer, status=status, details=details)
        return verdicts  # type: ignore[return-value]

    @staticmethod
    def _verdict(found: Extraction, answer: str | None, gold: str, result: JobResult) -> Verdict:
        details: dict[str, Any] = {"extraction": found.method, "strict": found.method in _STRICT_METHODS, "gold": gold}
        if result.ok:
            passed, parsed = result.value
            details["parsed"] = parsed
            return Verdict(score=float(passed), passed=passed, answer=answer if answer is not None else parsed,
                           details=details)
        if result.timed_out:
            return Verdict(score=0.0, passed=False, answer=answer, details={**details, "timeout": True})
        return Verdict(score=0.0, passed=False, answer=answer, status="error",
                       details={**details, "error": result.error})

    def gold_completion(self, sample: Sample) -> str | None:
        if not sample.reference:
            return None
        return "<answer>\\boxed{" + normalize_gold(sample.reference) + "}</answer>"

    def describe(self) -> dict[str, Any]:
        return {"math_verify": _dist_version("math-verify"), "timeout_s": self.timeout, "fallback": self.fallback,
                "workers": self.workers, "deadline": "parent-enforced, per answer"}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
