"""Find run directories and load their ``run.json`` as validated :class:`RunRecord` objects.

A run directory is any folder holding a ``run.json`` (written by the runner). Records that fail
validation (malformed JSON, unknown fields, a newer ``schema_version``, a ``decoding.config_hash`` that
does not match its fields) are skipped with one warning naming the file; the rest still build.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from dare.harness.errors import InputError
from dare.harness.records import RunRecord

log = logging.getLogger(__name__)

RUN_FILE = "run.json"


@dataclass(frozen=True)
class LoadedRun:
    """One validated run record and where it lives. ``key`` is unique per run directory and file-name safe."""

    directory: Path
    record: RunRecord
    key: str

    @property
    def samples_file(self) -> Path:
        return self.directory / self.record.samples_path


@dataclass
class SkippedRun:
    path: Path
    reason: str


@dataclass
class LoadResult:
    runs: list[LoadedRun] = field(default_factory=list)
    skipped: list[SkippedRun] = field(default_factory=list)


def slug(text: str, limit: int = 40) -> str:
    """A file-name-safe rendering of ``text`` (lower case, ``[a-z0-9._-]`` only)."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-.")
    return cleaned[:limit] or "x"


def find_run_files(roots: Iterable[Path]) -> list[Path]:
    """Every ``run.json`` under ``roots`` (each root may itself be a run directory), sorted, no duplicates."""
    found: set[Path] = set()
    for root in roots:
        root = Path(root)
        if not root.exists():
            raise InputError(f"--runs {root}: no such directory; pass a folder that holds run directories")
        if root.is_file():
            if root.name != RUN_FILE:
                raise InputError(f"--runs {root}: expected a directory or a run.json file")
            found.add(root.resolve())
            continue
        # os.walk does not follow symlinked folders, so a link loop cannot hang the build.
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            if RUN_FILE in filenames:
                found.add((Path(dirpath) / RUN_FILE).resolve())
    return sorted(found)


def load_runs(roots: Iterable[Path]) -> LoadResult:
    """Load and validate every run record under ``roots``; invalid ones land in ``skipped`` with a reason."""
    result = LoadResult()
    for path in find_run_files(roots):
        try:
            record = _read_record(path)
        except _SkipRun as skip:
            log.warning("skipping run record %s: %s", path, skip.reason)
            result.skipped.append(SkippedRun(path, skip.reason))
            continue
        digest = hashlib.sha256(str(path.parent).encode()).hexdigest()[:8]
        result.runs.append(LoadedRun(path.parent, record, f"{slug(record.run_id, 32)}-{digest}"))
    log.info("loaded %d run records, skipped %d", len(result.runs), len(result.skipped))
    return result


class _SkipRun(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _read_record(path: Path) -> RunRecord:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise _SkipRun(f"cannot read it ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise _SkipRun(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise _SkipRun(f"expected a JSON object, found {type(data).__name__}")
    try:
        record = RunRecord.model_validate(data)
    except ValidationError as exc:
        raise _SkipRun(describe_validation_error(exc)) from exc
    for bench, metrics in record.metrics.items():
        for name, metric in metrics.items():
            if not all(math.isfinite(v) for v in (metric.value, *metric.ci)):
                raise _SkipRun(f"metrics.{bench}.{name} is not a finite number")
    return record


def describe_validation_error(exc: ValidationError, limit: int = 3) -> str:
    """pydantic's multi-line report squeezed into one line: ``field.path: message; ...``."""
    parts = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(p) for p in error["loc"]) or "record"
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more problem(s)")
    return "; ".join(parts)


def iter_sample_lines(path: Path) -> Iterator[tuple[str, dict]]:
    """Yield ``(raw_line, parsed)`` for each valid JSON object line of a samples.jsonl.

    A torn or malformed line (a run killed mid-write) is skipped with a warning naming file and line;
    the raw text is kept so the site can copy it into a JS shard without re-serialising.
    """
    bad = 0
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:
                parsed = None
            if not isinstance(parsed, dict) or "benchmark" not in parsed or "id" not in parsed:
                bad += 1
                if bad <= 3:
                    log.warning("skipping malformed line %d of %s", number, path)
                continue
            yield line, parsed
    if bad > 3:
        log.warning("skipped %d malformed lines in %s in all", bad, path)
