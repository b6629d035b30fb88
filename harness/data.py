"""The benchmark data shipped inside the package, checked against its sha256 manifest on load.

Files live in ``harness/data/`` (copied with their README, sources and licences). Each line of a
``.jsonl`` file becomes a :class:`~dare.harness.records.Sample`: ``id`` and ``prompt`` as is, ``answer``
as the reference, every other field in ``metadata``.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

from .errors import DataError
from .records import Sample

DATA_DIR = Path(__file__).resolve().parent / "data"


@functools.cache
def manifest() -> dict[str, str]:
    """File name -> expected sha256, from ``MANIFEST.sha256``."""
    path = DATA_DIR / "MANIFEST.sha256"
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            out[name.strip()] = digest
    return out


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@functools.cache
def verified_path(name: str) -> tuple[Path, str]:
    """Path and sha256 of a shipped data file; raises DataError when missing or modified."""
    path = DATA_DIR / name
    if not path.is_file():
        raise DataError(f"data file {name} is missing from {DATA_DIR}; reinstall dare-dllm")
    digest = file_sha256(path)
    expected = manifest().get(name)
    if expected is None:
        raise DataError(f"data file {name} is not listed in MANIFEST.sha256; add its sha256 there")
    if digest != expected:
        raise DataError(f"data file {name} has sha256 {digest[:12]}..., expected {expected[:12]}...; "
                        "it was modified, reinstall dare-dllm")
    return path, digest


def iter_rows(name: str, limit: int | None = None) -> Iterator[dict]:
    """The raw JSON rows of a shipped file (the first ``limit``; None: all), in file order, read as they are
    asked for: a benchmark of 100k rows is never held whole. The whole file is hashed as it is read and must
    end as the manifest's sha256 (checked by :func:`verified_path` before the first row), so a file changed
    under a run is refused once the rows are all read."""
    path, expected = verified_path(name)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        rows = 0
        for lineno, raw in enumerate(f, 1):
            h.update(raw)
            if limit is not None and rows >= limit:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
                break
            line = raw.decode("utf-8")
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{name} line {lineno} is not valid JSON: {exc.msg}") from exc
                rows += 1
                yield row
    if h.hexdigest() != expected:
        raise DataError(f"data file {name} changed while this run read it (sha256 {h.hexdigest()[:12]}..., "
                        f"expected {expected[:12]}...); rerun once it is restored")


@functools.cache
def load_rows(name: str) -> tuple[dict, ...]:
    """The raw JSON rows of a shipped file, in file order (all held, and kept for the process)."""
    return tuple(iter_rows(name))


def row_to_sample(row: dict) -> Sample:
    meta = {k: v for k, v in row.items() if k not in ("id", "prompt", "answer")}
    answer = row.get("answer")
    return Sample(id=str(row["id"]), prompt=row["prompt"], reference=None if answer is None else str(answer),
                  metadata=meta)


def load_samples(name: str) -> list[Sample]:
    """Samples of a shipped data file, sha256-verified, in file order."""
    return [row_to_sample(r) for r in load_rows(name)]
