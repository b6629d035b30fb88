"""Content-addressed, append-only caches of generations and verdicts.

Generations are keyed by (model fingerprint, DecodingConfig hash + the engine's token identity: dtype,
kernel, device class, prompt hash, sample index, request seed) and verdicts by (verifier name + version
+ every option that can change a verdict, defaults included, data sha256, sample id, completion). Each cache
is a set of JSONL files appended and fsync'd per batch, so a run killed at any moment loses at most the
batch in flight; a torn last line is ignored on load and fenced off before the next append, and an append
that fails (a full disk: exit 74) is truncated away, so no partial record is ever read back. Verifier
upgrades change the verdict key, so cached generations are re-scored without regenerating.
"""

from __future__ import annotations

import json
import logging
import os
import weakref
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .diskfull import append_all
from .errors import DiskFullError, InputError
from .keyindex import KeyMap, digest
from .records import canonical_json, json_text, sha256_text

log = logging.getLogger(__name__)


def default_cache_root() -> Path:
    """The cache directory of callers that are given none (a run's is ``--cache-dir``, else ``OUT/.cache``):
    ``$DARE_CACHE_DIR``, else a directory private to this user under the system temp dir."""
    root = os.environ.get("DARE_CACHE_DIR")
    if not root:
        import stat
        import tempfile
        root = os.path.join(tempfile.gettempdir(), f"dare-{os.geteuid()}")
        os.makedirs(root, mode=0o700, exist_ok=True)
        info = os.lstat(root)
        if info.st_uid != os.geteuid() or not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o077:
            root = tempfile.mkdtemp(prefix="dare-")  # someone else's or a shared directory: never trust it
    return Path(root)


def cache_key(*parts: Any) -> str:
    return sha256_text(canonical_json(list(parts)))[:32]


class JsonlCache:
    """A ``key -> record`` map persisted as one append-only JSONL file. Only each key's place in the file is
    held (:class:`~dare.harness.keyindex.KeyMap`: about 40 bytes a key, where its line would be hundreds and
    its pydantic object more); :meth:`get` reads the line back and builds the record. A later line of a key
    replaces an earlier one, as a rerun's append does."""

    def __init__(self, path: Path, record_type: type[BaseModel]):
        self.path = path
        self.record_type = record_type
        self._index = KeyMap()
        self._fd: int | None = None
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        torn = 0
        hi, lo, offsets, lengths = array("Q"), array("Q"), array("q"), array("q")
        offset = 0
        with open(self.path, "rb") as f:
            for raw in f:
                line = raw.decode("utf-8")
                try:
                    row = json.loads(line)
                    self.record_type.model_validate(row["value"])  # an older record version is no record
                    h, low = digest(row["key"])
                except (ValueError, KeyError, TypeError, AttributeError):
                    torn += 1  # a line cut by a kill mid-write, or from an older record version
                else:
                    hi.append(h), lo.append(low), offsets.append(offset), lengths.append(len(raw))
                offset += len(raw)
        self._index = KeyMap.build(hi, lo, offsets, lengths)
        if torn:
            log.warning("%s: ignored %d unreadable cache line(s)", self.path, torn)

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def get(self, key: str) -> Any:
        place = self._index.get(key)
        if place is None:
            return None
        row = self._read(*place)
        if row.get("key") != key:  # the file was replaced under this reader: read the new one
            self._close()
            row = self._read(*place)
            if row.get("key") != key:
                raise InputError(f"the cache {self.path} changed while this run read it; rerun the command")
        return self.record_type.model_validate(row["value"])

    def _read(self, offset: int, length: int) -> dict:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
            self._closer = weakref.finalize(self, os.close, self._fd)
        try:
            return json.loads(os.pread(self._fd, length, offset).decode("utf-8"))
        except ValueError:
            return {}

    def _close(self) -> None:
        if self._fd is not None:
            self._closer()
            self._fd = None

    def extend(self, items: Iterable[tuple[str, BaseModel]]) -> None:
        """Append records and fsync, so they survive a kill right after this returns."""
        items = list(items)
        if not items:
            return
        lines = [(json_text({"key": k, "value": v.model_dump(mode="json")}) + "\n").encode("utf-8") for k, v in items]
        try:
            offset = append_all(self.path, b"".join(lines))  # all or nothing: no torn line of ours is left
        except DiskFullError:
            raise
        except OSError as exc:
            raise InputError(f"cannot write the cache at {self.path}: {exc.strerror}; "
                             "pass a writable --cache-dir") from exc
        for (key, _), line in zip(items, lines):
            self._index.put(key, offset, len(line))
            offset += len(line)


def generations_cache(root: Path, model_fingerprint: str, decoding_hash: str) -> JsonlCache:
    from .records import Generation

    return JsonlCache(root / "generations" / f"{model_fingerprint[:16]}-{decoding_hash}.jsonl", Generation)


def verdicts_cache(root: Path, verifier_id: str) -> JsonlCache:
    from .records import Verdict

    return JsonlCache(root / "verdicts" / f"{verifier_id}.jsonl", Verdict)
