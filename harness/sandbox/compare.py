"""Oracles: does one decoded candidate output match its expectation? Runs in the trusted parent only.

Values reaching here come from :func:`codec.decode`: built-in plain types, numpy arrays and scalars of
plain dtypes, and the hash-free :mod:`~.plain` containers, so ``==`` on them runs no candidate code.

Assert-style tests (HumanEval, MBPP) use ``eq`` / ``truthy`` / ``falsy``: the assert's own semantics on
the decoded value (an array compared with ``==`` is ambiguous there too, and fails).

EvalPlus datasets (HumanEval+, MBPP+) are graded by :class:`EvalPlusRules`, which follows
``evalplus.eval.unsafe_execute`` (evalplus 0.3.1) step for step and calls evalplus's own pieces: its
special-oracle task lists and reference functions (``evalplus.eval._special_oracle``), ``is_floats``
and ``np.allclose`` with its ``rtol``. Only ``set(out)`` is replaced by :func:`~.plain.canonical_set`,
which decides the same equality without hashing the candidate's values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from evalplus.eval import is_floats
    from evalplus.eval._special_oracle import (
        MBPP_OUTPUT_NOT_NONE_TASKS,
        MBPP_OUTPUT_SET_EQ_TASKS,
        _digit_distance_nums,
        _poly,
        _surface_Area,
    )
except ModuleNotFoundError as exc:  # the registry turns this into the one-line error of a missing extra
    raise ImportError(f"{exc}; the code verifier needs EvalPlus: pip install 'dare-dllm[code]' (in a venv with "
                      "OpenCompass: pip install --no-deps evalplus==0.3.1)") from exc

from .plain import Opaque, PlainDict, PlainSet, canonical_set

EVALPLUS_RTOL = 1e-07  # unsafe_execute's literal, chosen to match np.testing.assert_allclose
EVALPLUS_FLOAT_ATOL = 1e-6  # unsafe_execute: "enforce atol for float comparison"
EVALPLUS_ORACLES = {"evalplus:humaneval": "humaneval", "evalplus:mbpp": "mbpp"}


def opaque_inside(value: Any, depth: int = 0) -> bool:
    """Whether a decoded value holds a value of a type the child could not read as plain data."""
    if isinstance(value, Opaque):
        return True
    if depth < 50 and isinstance(value, (list, tuple, PlainSet)):
        return any(opaque_inside(v, depth + 1) for v in value)
    if depth < 50 and isinstance(value, PlainDict):
        return any(opaque_inside(k, depth + 1) or opaque_inside(v, depth + 1) for k, v in value.pairs)
    return False


#: elements a comparison may build where the candidate's numpy arrays meet the expected value: ``==`` and
#: ``np.allclose`` broadcast, so a (K, 1) array against a list of N numbers makes K x N booleans in this trusted
#: process before any verdict is read (K = 4000 against HumanEval+'s million-item answers: 4 GB)
MAX_BROADCAST = 1 << 24
_SCALARS = frozenset((int, float, bool, complex, str, bytes, type(None)))


def _parts(value: Any) -> list | tuple | None:
    """The values a decoded container holds (a dict's values: keys are never arrays), None for a leaf."""
    if isinstance(value, (list, tuple)):
        return value
    if isinstance(value, PlainSet):
        return value.members
    if isinstance(value, PlainDict):
        return [v for _, v in value.pairs]
    return None


def _size(value: Any, arrays_only: bool) -> int:
    """Elements of the numpy arrays in a decoded value (``arrays_only``), or of every leaf, arrays counted whole."""
    if isinstance(value, np.ndarray):
        return value.size
    parts = _parts(value)
    if parts is None:
        return 0 if arrays_only else 1
    if set(map(type, parts)) <= _SCALARS:  # the common flat answer, counted at C speed
        return 0 if arrays_only else len(parts)
    return sum(_size(v, arrays_only) for v in parts)


def broadcast_bounded(out: Any, exp: Any) -> bool:
    """Whether comparing ``out`` with ``exp`` builds at most MAX_BROADCAST elements: no arrays in ``out``, two arrays
    of one shape, or arrays so small that no broadcast against all of ``exp`` passes the bound. Where it would, the
    answer fails unread (stricter than EvalPlus only there: its ``==`` or ``allclose`` raises or runs out of memory)."""
    if type(out) in _SCALARS:
        return True
    if isinstance(out, np.ndarray) and isinstance(exp, np.ndarray) and out.shape == exp.shape:
        return True
    arrays = _size(out, arrays_only=True)
    return arrays == 0 or arrays * max(1, _size(exp, arrays_only=False)) <= MAX_BROADCAST


def equal(out: Any, exp: Any) -> bool:
    return not opaque_inside(out) and broadcast_bounded(out, exp) and bool(out == exp)


def truthy(out: Any, exp: Any) -> bool:
    return not opaque_inside(out) and bool(out)


def falsy(out: Any, exp: Any) -> bool:
    return not opaque_inside(out) and not bool(out)


ORACLES: dict[str, Callable[[Any, Any], bool]] = {"eq": equal, "truthy": truthy, "falsy": falsy}


class EvalPlusRules:
    """EvalPlus's per-input check for one sample. Stateful like the original: once a float expectation
    has set ``atol`` to 1e-6, it stays for the sample's later inputs. ``check`` raises where the original's
    assertion raises; the caller counts any exception as a failed test."""

    def __init__(self, dataset: str, entry_point: str, atol: float):
        self.dataset, self.entry_point, self.atol = dataset, entry_point, atol

    def check(self, out: Any, exp: Any, inp: list) -> bool:
        ep, atol = self.entry_point, self.atol
        if not broadcast_bounded(out, exp):
            return False
        if self.dataset == "mbpp" and ep in MBPP_OUTPUT_NOT_NONE_TASKS:
            exp = exp is not None  # evalplus's ground truth for these tasks is `out is not None`
        exact_match = out == exp
        if self.dataset == "mbpp":
            if ep == "are_equivalent":  # Mbpp/164: any returned value
                exact_match = exact_match or True
            elif ep == "sum_div":  # Mbpp/295
                exact_match = exact_match or out == 0
            elif ep == "surface_Area":  # Mbpp/581
                exact_match = exact_match or abs(out - _surface_Area(*inp)) <= atol
            elif ep == "digit_distance_nums":  # Mbpp/558
                exact_match = exact_match or out == _digit_distance_nums(*inp)
            elif ep in MBPP_OUTPUT_SET_EQ_TASKS:
                exact_match = canonical_set(out) == canonical_set(exp)
            elif ep in MBPP_OUTPUT_NOT_NONE_TASKS:
                exact_match = out == exp if isinstance(out, bool) else exp == (out is not None)
        if self.dataset == "humaneval" and ep == "find_zero":
            return bool(abs(_poly(*inp, out)) <= atol)
        if atol == 0 and is_floats(exp):
            atol = self.atol = EVALPLUS_FLOAT_ATOL
        if not exact_match and atol != 0:
            if type(out) != type(exp):  # noqa: E721 - the original compares types exactly
                return False
            if isinstance(exp, (list, tuple)) and len(out) != len(exp):
                return False
            return bool(np.allclose(out, exp, rtol=EVALPLUS_RTOL, atol=atol))
        return bool(exact_match)


def rules_for(oracle: str, entry_point: str, atol: float) -> EvalPlusRules | None:
    dataset = EVALPLUS_ORACLES.get(oracle)
    return EvalPlusRules(dataset, entry_point, atol) if dataset else None
