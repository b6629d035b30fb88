"""Oracles: does one decoded candidate output match its expectation? Runs in the trusted parent only.

Values reaching here come from :func:`codec.decode`, so they are built-in plain types and ``==`` on them
runs no candidate code. Equality follows Python's own semantics (``1 == 1.0 == True``), as the original
asserts do, so scores stay comparable with published numbers. ``close`` is EvalPlus's rule: exact match,
else (when ``atol`` is set, or 1e-6 when the expected value is float-like) elementwise closeness with
``rtol = 1e-7``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .codec import Opaque

RTOL = 1e-7
FLOAT_ATOL = 1e-6


def _opaque_inside(value: Any, depth: int = 0) -> bool:
    if isinstance(value, Opaque):
        return True
    if depth < 50 and isinstance(value, (list, tuple, set, frozenset)):
        return any(_opaque_inside(v, depth + 1) for v in value)
    if depth < 50 and isinstance(value, dict):
        return any(_opaque_inside(k, depth + 1) or _opaque_inside(v, depth + 1) for k, v in value.items())
    return False


def _is_floats(value: Any) -> bool:
    if type(value) is float:
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(type(v) is float for v in value)


def _number(value: Any) -> bool:
    return type(value) in (int, float, bool)


def all_close(out: Any, exp: Any, atol: float, rtol: float = RTOL, depth: int = 0) -> bool:
    """numpy.allclose on nested plain sequences of numbers, without broadcasting."""
    if _number(out) and _number(exp):
        if math.isnan(out) or math.isnan(exp):
            return False
        if math.isinf(out) or math.isinf(exp):
            return out == exp
        return abs(out - exp) <= atol + rtol * abs(exp)
    if depth < 50 and isinstance(out, (list, tuple)) and isinstance(exp, (list, tuple)) and len(out) == len(exp):
        return all(all_close(o, e, atol, rtol, depth + 1) for o, e in zip(out, exp))
    return False


def close(out: Any, exp: Any, atol: float) -> bool:
    if _opaque_inside(out):
        return False
    if out == exp:
        return True
    if atol == 0 and _is_floats(exp):
        atol = FLOAT_ATOL
    return atol != 0 and all_close(out, exp, atol)


def _as_set(value: Any) -> set | None:
    try:
        return set(value) if isinstance(value, (list, tuple, set, frozenset, str)) else None
    except TypeError:  # unhashable members
        return None


def set_equal(out: Any, exp: Any, atol: float) -> bool:
    out_set, exp_set = _as_set(out), _as_set(exp)
    return out_set is not None and out_set == exp_set


def not_none(out: Any, exp: Any, atol: float) -> bool:
    # EvalPlus grades these tasks on "returned something" (a re.Match, say); a bool return is compared as is
    expected_some = exp if isinstance(exp, bool) else exp is not None
    return (out == exp) if isinstance(out, bool) else (out is not None) == expected_some


def equal(out: Any, exp: Any, atol: float) -> bool:
    return not _opaque_inside(out) and out == exp


def truthy(out: Any, exp: Any, atol: float) -> bool:
    return not _opaque_inside(out) and bool(out)


def falsy(out: Any, exp: Any, atol: float) -> bool:
    return not _opaque_inside(out) and not bool(out)


ORACLES: dict[str, Callable[[Any, Any, float], bool]] = {
    "eq": equal,
    "truthy": truthy,
    "falsy": falsy,
    "close": close,
    "set_eq": set_equal,
    "not_none": not_none,
}
