"""Decoded containers that never hash a candidate's values: sets and dicts ordered by canonical keys.

Python's own ``set`` and ``dict`` hash their members, and values with one hash (``k * (2**61 - 1)`` for
ints, say) make building them quadratic: 100k such members keep the parent busy for minutes, outside any
deadline. Here each hashable plain value gets a :func:`canonical_key`, a tuple that is equal for two
values exactly when Python's ``==`` says they are (``1 == 1.0 == True``, ``(1, 2) == (1.0, 2)``, ``-0.0 ==
0``, NaN equal to nothing), and that sorts totally. A :class:`PlainSet` keeps its members sorted by key,
so building one is a sort (n log n comparisons of plain data) and comparing two is a comparison of key
tuples; :class:`PlainDict` does the same for keys and keeps Python's rules for duplicates (the first key
object, the last value, in first-insertion order).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any

NUMPY_KINDS = "biufcUSMm"  # numpy dtype kinds that cross the boundary as raw bytes (no objects, no records)
_nan_ids = itertools.count()


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


def _number_key(value: Any) -> tuple:
    if type(value) is float:
        if math.isnan(value):
            return ("X", next(_nan_ids))  # NaN equals nothing, so every one is its own member
        if value.is_integer():
            return ("I", int(value))
        return ("F", value)
    return ("I", int(value))


def canonical_key(value: Any) -> tuple:
    """The sort key standing for ``value`` in sets and dict keys; TypeError for what Python cannot hash."""
    kind = type(value)
    if value is None:
        return ("N",)
    if kind in (bool, int, float):
        return _number_key(value)
    if kind is str:
        return ("S", value)
    if kind is bytes:
        return ("B", value)
    if kind is complex:
        return _number_key(value.real) if value.imag == 0 else ("C", _number_key(value.real), _number_key(value.imag))
    if kind is tuple:
        return ("T", tuple(canonical_key(v) for v in value))
    if kind is PlainFrozenSet:
        return ("Z", value.keys)
    module = getattr(kind, "__module__", "") or ""
    if module.startswith("numpy") and getattr(value, "ndim", None) == 0 and value.dtype.kind in "biufcUS":
        return canonical_key(value.item())  # numpy scalars hash and compare as their Python value
    raise TypeError(f"unhashable type: {kind.__name__!r}")


def _sorted_unique(values: Iterable[Any]) -> tuple[tuple, tuple]:
    keyed = sorted(((canonical_key(v), i, v) for i, v in enumerate(values)), key=lambda t: (t[0], t[1]))
    keys, members = [], []
    for key, _, value in keyed:
        if not keys or keys[-1] != key:
            keys.append(key)
            members.append(value)
    return tuple(keys), tuple(members)


class PlainSet:
    """A decoded ``set``: members in canonical order. Equal to a PlainSet or PlainFrozenSet with equal members."""

    __slots__ = ("keys", "members")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, keys: tuple, members: tuple):
        self.keys, self.members = keys, members

    @classmethod
    def build(cls, values: Iterable[Any]) -> PlainSet:
        return cls(*_sorted_unique(values))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainSet) and self.keys == other.keys

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __len__(self) -> int:
        return len(self.members)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.members)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.members)} members)"


class PlainFrozenSet(PlainSet):
    """A decoded ``frozenset``: hashable in Python, so it may be a set member or dict key (by its keys)."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]


def canonical_set(value: Any) -> PlainSet:
    """``set(value)`` without hashing: EvalPlus's set oracle on decoded data. TypeError where ``set`` raises."""
    if isinstance(value, PlainSet):
        return value
    if isinstance(value, PlainDict):
        return PlainSet.build(value.key_list())
    if isinstance(value, (list, tuple, str, bytes)):
        return PlainSet.build(value)
    if getattr(value, "ndim", 0) == 1 and (getattr(type(value), "__module__", "") or "").startswith("numpy"):
        return PlainSet.build(list(value))
    raise TypeError(f"{type(value).__name__!r} object is not iterable")


class PlainDict:
    """A decoded ``dict``: items in insertion order; compared through canonically sorted keys."""

    __slots__ = ("pairs", "keys", "order")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, pairs: list, keys: tuple, order: tuple):
        self.pairs, self.keys, self.order = pairs, keys, order

    @classmethod
    def build(cls, pairs: list) -> PlainDict:
        keyed = sorted(((canonical_key(k), i) for i, (k, _) in enumerate(pairs)))
        first: dict[int, int] = {}  # position of the kept entry -> position of the value that wins
        keys, heads = [], []
        for key, i in keyed:
            if keys and keys[-1] == key:
                first[heads[-1]] = i
            else:
                keys.append(key)
                heads.append(i)
                first[i] = i
        kept = sorted(heads)
        rank = {pos: n for n, pos in enumerate(kept)}
        items = [[pairs[pos][0], pairs[first[pos]][1]] for pos in kept]
        return cls(items, tuple(keys), tuple(rank[h] for h in heads))

    def items(self) -> list:
        return [(k, v) for k, v in self.pairs]

    def key_list(self) -> list:
        return [k for k, _ in self.pairs]

    def _sorted_values(self) -> Iterator[Any]:
        return (self.pairs[n][1] for n in self.order)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlainDict) or self.keys != other.keys:
            return False
        return all(bool(a == b) for a, b in zip(self._sorted_values(), other._sorted_values()))

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __len__(self) -> int:
        return len(self.pairs)

    def __repr__(self) -> str:
        return f"PlainDict({len(self.pairs)} items)"


def to_python(value: Any, depth: int = 0) -> Any:
    """Decoded data -> Python's own sets and dicts, for *trusted* values only (it hashes them), e.g. to hand
    expected outputs to another grader. Opaque values stay as they are."""
    if depth > 200:
        raise ValueError("value nested too deeply")
    if isinstance(value, PlainFrozenSet):
        return frozenset(to_python(v, depth + 1) for v in value)
    if isinstance(value, PlainSet):
        return {to_python(v, depth + 1) for v in value}
    if isinstance(value, PlainDict):
        return {to_python(k, depth + 1): to_python(v, depth + 1) for k, v in value.pairs}
    if type(value) is list:
        return [to_python(v, depth + 1) for v in value]
    if type(value) is tuple:
        return tuple(to_python(v, depth + 1) for v in value)
    return value
