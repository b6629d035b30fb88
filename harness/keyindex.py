"""Compact indexes from string keys to file positions: what lets a run of 100k samples keep its caches,
its replayed completions and its suite's sample ids without holding them as Python objects.

A key is kept as its 128-bit BLAKE2b digest, split into two unsigned 64-bit halves (``hi``, ``lo``), in flat
``array`` columns sorted by ``hi``: 16 bytes a key plus 8 a value column, where a ``dict[str, int]`` costs
about 150 (1M cache keys: 32 MiB instead of 150). A lookup hashes the key (about 1 us) and bisects ``hi``
(about 2 us); equal ``hi`` halves (astronomically rare) are told apart by ``lo``. A digest identifies its key
as a 128-bit cache key identifies its content: readers of a position still check the key stored there.
"""

from __future__ import annotations

import hashlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable

import numpy as np

MERGE_AT = 4096
"""Recent puts kept in a dict before they are merged into the sorted columns (or a sixteenth of them)."""


def digest(key: str) -> tuple[int, int]:
    """``(hi, lo)``: the key's 128-bit BLAKE2b digest as two unsigned 64-bit integers."""
    d = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return int.from_bytes(d[:8], "big"), int.from_bytes(d[8:], "big")


class SortedKeys:
    """A static multimap: digests sorted by ``hi`` (equal keys in the order given) and ``columns`` of int64
    values beside them. Built once from ``(key digest, values...)`` rows, e.g. one per line of a file."""

    def __init__(self, hi: Iterable[int] = (), lo: Iterable[int] = (), *columns: Iterable[int]):
        h = np.asarray(array("Q", hi), dtype=np.uint64)
        order = np.argsort(h, kind="stable")  # equal digests keep their order (a sample's k completions)
        self.hi = array("Q", h[order].tobytes())
        self.lo = array("Q", np.asarray(array("Q", lo), dtype=np.uint64)[order].tobytes())
        self.columns = [array("q", np.asarray(array("q", c), dtype=np.int64)[order].tobytes()) for c in columns]

    @classmethod
    def of(cls, keys: Iterable[str]) -> SortedKeys:
        """The set of ``keys`` (membership only: ``in``, :meth:`contains`), e.g. a suite's sample ids."""
        hi, lo = array("Q"), array("Q")
        for key in keys:
            h, low = digest(key)
            hi.append(h), lo.append(low)
        return cls(hi, lo)

    def __len__(self) -> int:
        return len(self.hi)

    def contains(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """Whether each digest ``(hi[i], lo[i])`` is a key here (uint64 arrays; True/False per digest)."""
        keys_hi, keys_lo = np.frombuffer(self.hi, dtype=np.uint64), np.frombuffer(self.lo, dtype=np.uint64)
        at = np.searchsorted(keys_hi, hi)
        found, active = np.zeros(len(hi), dtype=bool), np.ones(len(hi), dtype=bool)
        while True:  # along each run of equal hi halves (one key, but for a 64-bit coincidence)
            same = active & (at < len(keys_hi))
            same[same] = keys_hi[at[same]] == hi[same]
            found[same] |= keys_lo[at[same]] == lo[same]
            active = same & ~found
            if not active.any():
                return found
            at = at + 1

    def positions(self, key: str) -> list[int]:
        """Where ``key``'s rows are, in the order they were given (empty: no such key)."""
        h, lo = digest(key)
        start, end = bisect_left(self.hi, h), bisect_right(self.hi, h)
        return [i for i in range(start, end) if self.lo[i] == lo]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self.positions(key))


class KeyMap:
    """A mutable ``str -> (a, b)`` map of int64 pairs (the last put of a key wins): sorted columns plus a dict
    of recent puts, merged into the columns once it holds :data:`MERGE_AT` keys or a sixteenth of them."""

    def __init__(self) -> None:
        self._sorted = SortedKeys((), (), (), ())
        self._recent: dict[tuple[int, int], tuple[int, int]] = {}
        self._size = 0

    @classmethod
    def build(cls, hi: array, lo: array, a: array, b: array) -> KeyMap:
        """From rows in file order (a later row of a key replaces an earlier one)."""
        out = cls()
        rows = SortedKeys(hi, lo, a, b)
        keep = _last_of_each_key(rows)
        out._sorted = SortedKeys(*(array(c.typecode, np.frombuffer(c, dtype=c.typecode)[keep].tobytes())
                                   for c in (rows.hi, rows.lo, *rows.columns)))
        out._size = len(out._sorted)
        return out

    def __len__(self) -> int:
        return self._size

    def get(self, key: str) -> tuple[int, int] | None:
        d = digest(key)
        found = self._recent.get(d)
        if found is None:
            i = self._find(d)
            found = None if i is None else (self._sorted.columns[0][i], self._sorted.columns[1][i])
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def put(self, key: str, a: int, b: int) -> None:
        d = digest(key)
        i = None if d in self._recent else self._find(d)
        if i is not None:  # a key already in the columns: its values in place
            self._sorted.columns[0][i], self._sorted.columns[1][i] = a, b
            return
        self._size += d not in self._recent
        self._recent[d] = (a, b)
        if len(self._recent) >= max(MERGE_AT, len(self._sorted.hi) >> 4):
            self._merge()

    def _find(self, d: tuple[int, int]) -> int | None:
        """Where digest ``d`` is in the sorted columns (None: not there)."""
        s = self._sorted
        for i in range(bisect_left(s.hi, d[0]), bisect_right(s.hi, d[0])):
            if s.lo[i] == d[1]:
                return i
        return None

    def _merge(self) -> None:
        """Insert the recent keys (none of them in the columns: :meth:`put` updates those in place)."""
        s, new = self._sorted, sorted((h, lo, a, b) for (h, lo), (a, b) in self._recent.items())
        self._recent.clear()
        cols = list(zip(*new))
        at = np.searchsorted(np.frombuffer(s.hi, dtype=np.uint64), np.array(cols[0], dtype=np.uint64))
        merged = SortedKeys.__new__(SortedKeys)
        merged.hi, merged.lo, *merged.columns = (
            array(c.typecode, np.insert(np.frombuffer(c, dtype=c.typecode), at, np.array(v, dtype=c.typecode))
                  .tobytes()) for c, v in zip((s.hi, s.lo, *s.columns), cols))
        self._sorted = merged


def _last_of_each_key(rows: SortedKeys) -> np.ndarray:
    """Indices of ``rows`` keeping the last row of each (hi, lo) digest (rows of one key are adjacent in the
    order given when no other key shares their ``hi``; a shared ``hi`` is sorted out by ``lo`` here)."""
    hi = np.frombuffer(rows.hi, dtype=np.uint64)
    lo = np.frombuffer(rows.lo, dtype=np.uint64)
    order = np.lexsort((np.arange(len(hi)), lo, hi))  # by digest, then by the order given
    h, lo_sorted = hi[order], lo[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = (h[1:] != h[:-1]) | (lo_sorted[1:] != lo_sorted[:-1])
    return np.sort(order[last])
