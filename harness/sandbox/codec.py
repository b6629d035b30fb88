"""The strict plain-data codec between the trusted parent and the sandboxed child.

Wire format: JSON where ``None``, bool, int, finite float, str and list are themselves, and every other
type is a one-key object: ``{"t": [...]}`` tuple, ``{"d": [[k, v], ...]}`` dict, ``{"s": [...]}`` set,
``{"z": [...]}`` frozenset, ``{"f": "inf"}`` non-finite float, ``{"c": [re, im]}`` complex, ``{"b": hex}``
bytes, ``{"x": type name}`` a value of a type the child could not reduce to plain data. The child's
encoder lives in ``child_runner.py`` (it cannot import this module); tests check the two agree.

:func:`decode` is the trusted side: it returns only built-in plain values (an :class:`Opaque` for ``x``),
so comparing them in the parent never runs code the candidate wrote.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 200


class CodecError(ValueError):
    """The child's data is malformed (wrong tag, wrong type, too deep, unhashable key)."""


class Opaque:
    """A value the child could not express as plain data; never equal to anything, itself included."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<unsupported {self.type_name}>"


def _reject_constant(name: str) -> Any:
    raise CodecError(f"bare {name} is not allowed; non-finite floats must be tagged")


def loads(text: str | bytes) -> Any:
    """Parse one JSON document strictly (no NaN/Infinity literals). Raises CodecError."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise CodecError(f"malformed record: {str(exc)[:120]}") from None


def decode(wire: Any, depth: int = 0) -> Any:
    """Wire form (already parsed JSON) -> plain Python value, type-checked at every level."""
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    kind = type(wire)
    if wire is None or kind is bool or kind is str or kind is int:
        return wire
    if kind is float:
        if not math.isfinite(wire):
            raise CodecError("untagged non-finite float")
        return wire
    if kind is list:
        return [decode(v, depth + 1) for v in wire]
    if kind is not dict or len(wire) != 1:
        raise CodecError(f"unexpected {kind.__name__} in data")
    ((tag, body),) = wire.items()
    return _decode_tagged(tag, body, depth)


def _items(body: Any, depth: int) -> list:
    if type(body) is not list:
        raise CodecError("tagged container body must be a list")
    return [decode(v, depth + 1) for v in body]


def _decode_tagged(tag: str, body: Any, depth: int) -> Any:
    try:
        if tag == "t":
            return tuple(_items(body, depth))
        if tag == "s":
            return set(_items(body, depth))
        if tag == "z":
            return frozenset(_items(body, depth))
        if tag == "d":
            pairs = _items(body, depth)
            if not all(type(p) is list and len(p) == 2 for p in pairs):
                raise CodecError("dict entries must be [key, value] pairs")
            return {k: v for k, v in pairs}
        if tag == "f" and type(body) is str and body in ("inf", "-inf", "nan"):
            return float(body)
        if tag == "c" and type(body) is list and len(body) == 2:
            re_, im = (decode(v, depth + 1) for v in body)
            if type(re_) is not float or type(im) is not float:
                raise CodecError("complex parts must be floats")
            return complex(re_, im)
        if tag == "b" and type(body) is str:
            return bytes.fromhex(body)
        if tag == "x" and type(body) is str:
            return Opaque(body[:80])
    except TypeError as exc:  # unhashable set member or dict key
        raise CodecError(f"invalid {tag!r} value: {exc}") from None
    raise CodecError(f"unknown tag {tag!r}")


def encode(value: Any, depth: int = 0) -> Any:
    """Plain Python value -> wire form. Trusted side only: used for inputs and replayed outputs."""
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, str, int):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"s" if kind is set else "z": [encode(v, depth + 1) for v in value]}
    if kind is complex:
        return {"c": [float(value.real), float(value.imag)]}
    if kind in (bytes, bytearray):
        return {"b": bytes(value).hex()}
    if kind is Opaque:
        return {"x": value.type_name}
    raise CodecError(f"cannot encode {kind.__name__}")


def dumps(wire: Any) -> str:
    return json.dumps(wire, separators=(",", ":"), allow_nan=False)
