"""The strict plain-data codec between the trusted parent and the sandboxed child.

Wire format: JSON where ``None``, bool, int within 64 bits, finite float, str and list are themselves, and
every other type is a one-key object: ``{"t": [...]}`` tuple, ``{"d": [[k, v], ...]}`` dict, ``{"s": [...]}``
set, ``{"z": [...]}`` frozenset, ``{"f": "inf"}`` non-finite float, ``{"c": [re, im]}`` complex, ``{"b": hex}``
bytes, ``{"i": hex}`` int beyond 64 bits, ``{"a": [dtype, shape, hex]}`` numpy array, ``{"n": [dtype, hex]}``
numpy scalar, ``{"x": type name}`` a value of a type the child could not reduce to plain data. The child's
encoder lives in ``child_runner.py`` (it cannot import this module); tests check the two agree.

:func:`loads` and :func:`decode` are the trusted side, and everything they read may be hostile. Both are
bounded: a record over :data:`MAX_RECORD_BYTES`, whose decoding would cost more than
:data:`MAX_RECORD_COST` (:func:`record_cost`), nested deeper than :data:`MAX_DEPTH` or with an over-long
tagged string is refused *before* it is built, so no record costs the parent more than a fixed amount
of memory or time. Sets and dicts are never built from
candidate values (hashing attacker-chosen values is quadratic on colliding hashes): they decode to
:class:`~.plain.PlainSet` / :class:`~.plain.PlainDict`, compared through canonical sorted keys. Every
failure is a :class:`CodecError`, which the verdict turns into the sample's fail.
"""

from __future__ import annotations

import json
import math
import re
from json.decoder import scanstring
from typing import Any

from .plain import MAX_KEYED_MEMBERS, NUMPY_KINDS, Opaque, PlainDict, PlainFrozenSet, PlainSet, canonical_key

MAX_DEPTH = 200
MAX_RECORD_BYTES = 40 << 20  # the child caps one output at 32 MiB of JSON; framing and the record's keys on top
# What one record may cost the parent to parse and decode (see record_cost): the charges are CPython's
# worst cases per element (a one-pair dict entry holds three containers and about 1 KiB), so no shape of
# record raises the parent's memory by more than about 200 MiB. The child applies the same bound to each
# output before sending it (child_runner.encoded_output), so a reference's output is never refused here.
MAX_RECORD_COST = 160 << 20
CONTAINER_COST, STRING_COST, VALUE_COST = 384, 80, 40
MAX_INT_HEX = 1 << 22  # hex digits of one big int (16 Mbit, about 5 million decimal digits)
INT_BOUND = 1 << 63
_NUMBERS = frozenset((int, float, bool))
_WORDS = frozenset((str, bool, type(None)))
_DTYPE = re.compile(r"[<>|=][biufcUSMm]\d{1,4}(?:\[\w{1,3}\])?")
_HEX = re.compile(r"-?[0-9a-f]+")


class CodecError(ValueError):
    """The child's data is malformed, too large or too complex; always the sample's fail, never an error."""


def _reject_constant(name: str) -> Any:
    raise CodecError(f"bare {name} is not allowed; non-finite floats must be tagged")


def record_cost(text: str | bytes, limit: int = MAX_RECORD_COST) -> int:
    """An upper bound on what parsing and decoding ``text`` costs the parent, in bytes, in linear time.

    Every container opens with ``[`` or ``{``, every string has two quotes, every further element follows a
    comma; each is charged what CPython spends on it at most (``CONTAINER_COST``, ``STRING_COST``,
    ``VALUE_COST``), plus the text itself. Strings may hold those characters too, so when the quick bound
    is over ``limit`` the strings are skipped with json's own C scanner and only the structure outside them
    is charged, stopping as soon as ``limit`` is passed.
    """
    b = type(text) is bytes
    containers = text.count(b"[" if b else "[") + text.count(b"{" if b else "{")
    strings = text.count(b'"' if b else '"') // 2
    values = text.count(b"," if b else ",") + 1
    cost = len(text) + CONTAINER_COST * containers + STRING_COST * strings + VALUE_COST * values
    if cost <= limit:
        return cost
    if b:
        text = text.decode("utf-8")
    pos, cost = 0, len(text) + VALUE_COST
    while cost <= limit:
        q = text.find('"', pos)
        end = len(text) if q < 0 else q
        cost += CONTAINER_COST * (text.count("[", pos, end) + text.count("{", pos, end))
        cost += VALUE_COST * text.count(",", pos, end)
        if q < 0:
            break
        cost += STRING_COST
        _, pos = scanstring(text, q + 1, True)
    return cost


def loads(text: str | bytes) -> Any:
    """Parse one record strictly and within the size and count bounds. Raises CodecError."""
    if len(text) > MAX_RECORD_BYTES:
        raise CodecError(f"record of {len(text)} bytes is over the {MAX_RECORD_BYTES >> 20} MiB limit")
    try:
        if record_cost(text) > MAX_RECORD_COST:
            raise CodecError(f"record would take more than {MAX_RECORD_COST >> 20} MiB to decode")
        return json.loads(text, parse_constant=_reject_constant)  # json caps bare ints at 4300 digits
    except CodecError:
        raise
    except (ValueError, RecursionError, UnicodeDecodeError, MemoryError) as exc:
        raise CodecError(f"malformed record: {str(exc)[:120]}") from None


def decode(wire: Any, depth: int = 0) -> Any:
    """Wire form (already parsed by :func:`loads`) -> plain value, type-checked at every level."""
    try:
        return _decode(wire, depth, [MAX_KEYED_MEMBERS])
    except CodecError:
        raise
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        raise CodecError(f"invalid value: {type(exc).__name__}: {str(exc)[:120]}") from None


def _decode(wire: Any, depth: int, budget: list) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    kind = type(wire)
    if wire is None or kind is bool or kind is str:
        return wire
    if kind is int:
        if not -INT_BOUND <= wire < INT_BOUND:
            raise CodecError("ints beyond 64 bits must be hex-tagged")
        return wire
    if kind is float:
        if not math.isfinite(wire):
            raise CodecError("untagged non-finite float")
        return wire
    if kind is list:
        flat = _flat_list(wire)
        return flat if flat is not None else [_decode(v, depth + 1, budget) for v in wire]
    if kind is not dict or len(wire) != 1:
        raise CodecError(f"unexpected {kind.__name__} in data")
    ((tag, body),) = wire.items()
    return _decode_tagged(tag, body, depth, budget)


def _flat_list(wire: list) -> list | None:
    """A copy of a list of plain scalars, checked by C-level passes (the common big output: numbers or words)."""
    kinds = set(map(type, wire))
    if kinds <= _NUMBERS:
        if float in kinds and not all(map(math.isfinite, wire)):
            raise CodecError("untagged non-finite float")
        ints = wire if float not in kinds else [v for v in wire if type(v) is int]
        if int in kinds and not -INT_BOUND <= min(ints) <= max(ints) < INT_BOUND:
            raise CodecError("ints beyond 64 bits must be hex-tagged")
        return list(wire)
    return list(wire) if kinds <= _WORDS else None


def _items(body: Any, depth: int, budget: list) -> list:
    if type(body) is not list:
        raise CodecError("tagged container body must be a list")
    return [_decode(v, depth + 1, budget) for v in body]


def _text(body: Any, limit: int, what: str) -> str:
    if type(body) is not str or len(body) > limit:
        raise CodecError(f"{what} must be a string of at most {limit} characters")
    return body


def _decode_tagged(tag: str, body: Any, depth: int, budget: list) -> Any:
    if tag == "t":
        return tuple(_items(body, depth, budget))
    if tag in ("s", "z"):
        values = _items(body, depth, budget)
        return (PlainSet if tag == "s" else PlainFrozenSet).build(values, budget)
    if tag == "d":
        pairs = _items(body, depth, budget)
        if not all(type(p) is list and len(p) == 2 for p in pairs):
            raise CodecError("dict entries must be [key, value] pairs")
        return PlainDict.build(pairs, budget)
    if tag == "f" and body in ("inf", "-inf", "nan"):
        return float(body)
    if tag == "c" and type(body) is list and len(body) == 2:
        re_, im = (_decode(v, depth + 1, budget) for v in body)
        if type(re_) is not float or type(im) is not float:
            raise CodecError("complex parts must be floats")
        return complex(re_, im)
    if tag == "b":
        return bytes.fromhex(_text(body, MAX_RECORD_BYTES, "bytes"))
    if tag == "i":
        digits = _text(body, MAX_INT_HEX, "a big int")
        if not _HEX.fullmatch(digits):
            raise CodecError("big int must be lower-case hex")
        return int(digits, 16)
    if tag in ("a", "n"):
        return _numpy(tag, body)
    if tag == "x" and type(body) is str:
        return Opaque(body[:80])
    raise CodecError(f"unknown tag {tag!r}")


def _numpy(tag: str, body: Any) -> Any:
    """A numpy array or scalar rebuilt from (dtype, shape, raw bytes); only plain, fixed-size dtypes."""
    import numpy as np

    if type(body) is not list or len(body) != (3 if tag == "a" else 2):
        raise CodecError("numpy value must be [dtype, shape, hex] or [dtype, hex]")
    dtype_text = _text(body[0], 16, "dtype")
    if not _DTYPE.fullmatch(dtype_text):
        raise CodecError(f"dtype {dtype_text!r} is not a plain numpy dtype")
    dtype = np.dtype(dtype_text)
    if dtype.kind not in NUMPY_KINDS or dtype.fields is not None or dtype.itemsize == 0:
        raise CodecError(f"dtype {dtype_text!r} is not a plain numpy dtype")
    data = bytes.fromhex(_text(body[-1], MAX_RECORD_BYTES, "array data"))
    if tag == "n":
        if len(data) != dtype.itemsize:
            raise CodecError("numpy scalar has the wrong number of bytes")
        return np.frombuffer(data, dtype)[0]
    shape = body[1]
    if type(shape) is not list or len(shape) > 32 or not all(type(n) is int and 0 <= n < INT_BOUND for n in shape):
        raise CodecError("array shape must be a list of at most 32 sizes")
    if math.prod(shape) * dtype.itemsize != len(data):
        raise CodecError("array data does not match its shape")
    return np.frombuffer(data, dtype).reshape(shape).copy()


def encode(value: Any, depth: int = 0) -> Any:
    """Plain Python value -> wire form. Trusted side only: used for inputs and replayed outputs."""
    if depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, str):
        return value
    if kind is int:
        return value if -INT_BOUND <= value < INT_BOUND else {"i": format(value, "x")}
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"t": [encode(v, depth + 1) for v in value]}
    if kind is dict or kind is PlainDict:
        items = value.items()
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in items]}
    if kind in (set, frozenset, PlainSet, PlainFrozenSet):
        tag = "z" if kind in (frozenset, PlainFrozenSet) else "s"
        return {tag: [encode(v, depth + 1) for v in value]}
    if kind is complex:  # parts tagged like any float: inf and nan parts stay valid JSON
        return {"c": [encode(value.real, depth + 1), encode(value.imag, depth + 1)]}
    if kind in (bytes, bytearray):
        return {"b": bytes(value).hex()}
    if kind is Opaque:
        return {"x": value.type_name}
    if type(kind).__module__ == "builtins" and getattr(kind, "__module__", "").startswith("numpy"):
        return _encode_numpy(value)
    raise CodecError(f"cannot encode {kind.__name__}")


def _encode_numpy(value: Any) -> Any:
    import numpy as np

    array = np.asarray(value)
    if array.dtype.kind not in NUMPY_KINDS or array.dtype.fields is not None:
        raise CodecError(f"cannot encode numpy dtype {array.dtype}")
    if isinstance(value, np.generic):
        return {"n": [array.dtype.str, array.tobytes().hex()]}
    return {"a": [array.dtype.str, list(array.shape), array.tobytes().hex()]}


def dumps(wire: Any) -> str:
    return json.dumps(wire, separators=(",", ":"), allow_nan=False)


__all__ = ["CodecError", "Opaque", "PlainDict", "PlainFrozenSet", "PlainSet", "canonical_key", "record_cost",
           "decode", "dumps", "encode", "loads"]
