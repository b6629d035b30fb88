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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .diskfull import append_all
from .errors import DiskFullError, InputError
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
    """A ``key -> record`` map persisted as one append-only JSONL file. Records are kept as their JSON lines
    and built on :meth:`get`: a line is a fraction of its pydantic object's memory (1M verdicts: about a
    quarter), and a run reads each record once or twice."""

    def __init__(self, path: Path, record_type: type[BaseModel]):
        self.path = path
        self.record_type = record_type
        self._items: dict[str, str] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        torn = 0
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                    self.record_type.model_validate(row["value"])  # an older record version is no record
                    self._items[row["key"]] = line
                except (ValueError, KeyError, TypeError):
                    torn += 1  # a line cut by a kill mid-write, or from an older record version
        if torn:
            log.warning("%s: ignored %d unreadable cache line(s)", self.path, torn)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> Any:
        line = self._items.get(key)
        return None if line is None else self.record_type.model_validate(json.loads(line)["value"])

    def extend(self, items: Iterable[tuple[str, BaseModel]]) -> None:
        """Append records and fsync, so they survive a kill right after this returns."""
        items = list(items)
        if not items:
            return
        lines = [json_text({"key": k, "value": v.model_dump(mode="json")}) + "\n" for k, v in items]
        try:
            append_all(self.path, "".join(lines).encode("utf-8"))  # all or nothing: no torn line of ours is left
        except DiskFullError:
            raise
        except OSError as exc:
            raise InputError(f"cannot write the cache at {self.path}: {exc.strerror}; "
                             "pass a writable --cache-dir") from exc
        self._items.update((k, line) for (k, _), line in zip(items, lines))


def generations_cache(root: Path, model_fingerprint: str, decoding_hash: str) -> JsonlCache:
    from .records import Generation

    return JsonlCache(root / "generations" / f"{model_fingerprint[:16]}-{decoding_hash}.jsonl", Generation)


def verdicts_cache(root: Path, verifier_id: str) -> JsonlCache:
    from .records import Verdict

    return JsonlCache(root / "verdicts" / f"{verifier_id}.jsonl", Verdict)
