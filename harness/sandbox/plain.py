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


MAX_KEYED_MEMBERS = 500_000  # set members and dict keys of mixed types in one record (~150 B each here)


def _simple_kind(values: list) -> str | None:
    """"int", "str" or "bytes" when every value has exactly that type: then the values are their own keys."""
    if not values:
        return "empty"
    kind = type(values[0])
    if kind in (int, str, bytes) and all(type(v) is kind for v in values):
        return kind.__name__
    return None


def _order(values: list, budget: list | None) -> tuple[str | None, list, list]:
    """(kind, keys, positions): ``positions`` sorted by key, then by position (stable), and ``keys`` per value."""
    kind = _simple_kind(values)
    if kind is not None:
        keys = values
    else:
        if budget is not None:
            budget[0] -= len(values)
            if budget[0] < 0:
                raise ValueError(f"more than {MAX_KEYED_MEMBERS} set members or dict keys of mixed types")
        keys = [canonical_key(v) for v in values]
    return kind, keys, sorted(range(len(values)), key=keys.__getitem__)


class PlainSet:
    """A decoded ``set``: members in canonical order. Equal to a PlainSet or PlainFrozenSet with equal members."""

    __slots__ = ("kind", "members", "_keys")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, kind: str | None, members: tuple, keys: tuple | None = None):
        self.kind, self.members, self._keys = kind, members, keys

    @classmethod
    def build(cls, values: Iterable[Any], budget: list | None = None) -> PlainSet:
        values = list(values)
        kind, keys, order = _order(values, budget)
        kept = [i for n, i in enumerate(order) if n == 0 or keys[order[n - 1]] != keys[i]]
        members = tuple(values[i] for i in kept)
        return cls(kind, members, None if kind is not None else tuple(keys[i] for i in kept))

    @property
    def keys(self) -> tuple:
        """Canonical keys in order (for simple kinds derived on demand: they sort as the values do)."""
        if self._keys is None:
            self._keys = tuple(canonical_key(v) for v in self.members)
        return self._keys

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlainSet) or len(self.members) != len(other.members):
            return False
        if self.kind is not None and self.kind == other.kind:
            return self.members == other.members
        return self.keys == other.keys

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
    budget = [MAX_KEYED_MEMBERS]
    if isinstance(value, PlainDict):
        return PlainSet.build(value.key_list(), budget)
    if isinstance(value, (list, tuple, str, bytes)):
        return PlainSet.build(value, budget)
    if getattr(value, "ndim", 0) == 1 and (getattr(type(value), "__module__", "") or "").startswith("numpy"):
        return PlainSet.build(list(value), budget)
    raise TypeError(f"{type(value).__name__!r} object is not iterable")


class PlainDict:
    """A decoded ``dict``: items in insertion order; compared through canonically sorted keys."""

    __slots__ = ("pairs", "kind", "order", "_keys")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, pairs: list, kind: str | None, order: tuple, keys: tuple | None):
        self.pairs, self.kind, self.order, self._keys = pairs, kind, order, keys

    @classmethod
    def build(cls, pairs: list, budget: list | None = None) -> PlainDict:
        kind, keys, order = _order([k for k, _ in pairs], budget)
        heads, last = [], {}  # per distinct key: its first position, and the position of the value that wins
        for n, i in enumerate(order):
            if n and keys[order[n - 1]] == keys[i]:
                last[heads[-1]] = i
            else:
                heads.append(i)
                last[i] = i
        kept = sorted(heads)
        rank = {pos: n for n, pos in enumerate(kept)}
        items = [[pairs[pos][0], pairs[last[pos]][1]] for pos in kept]
        sorted_keys = None if kind is not None else tuple(keys[h] for h in heads)
        return cls(items, kind, tuple(rank[h] for h in heads), sorted_keys)

    @property
    def keys(self) -> tuple:
        if self._keys is None:
            self._keys = tuple(canonical_key(self.pairs[n][0]) for n in self.order)
        return self._keys

    def items(self) -> list:
        return [(k, v) for k, v in self.pairs]

    def key_list(self) -> list:
        return [k for k, _ in self.pairs]

    def _sorted(self, what: int) -> list:
        return [self.pairs[n][what] for n in self.order]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlainDict) or len(self.pairs) != len(other.pairs):
            return False
        if self.kind is not None and self.kind == other.kind:
            if self._sorted(0) != other._sorted(0):
                return False
        elif self.keys != other.keys:
            return False
        return all(bool(a == b) for a, b in zip(self._sorted(1), other._sorted(1)))

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
