"""The ``replay`` engine: scores completions produced by another tool.

The completions file is JSONL, one ``{"id": <sample id>, "completion": <text>}`` per line; several
lines with the same id are that sample's k generations, in file order. Every problem in the file
(malformed lines, unknown ids, samples without enough completions) is reported before anything is
scored. The model fingerprint is the file's sha256, so editing the file invalidates the cache.

The file is read once, line by line, and only where each completion is kept (:class:`Completions`: 40
bytes a line), not its text: each is read back when it is served, from the file opened at the start, so
100k completions cost a few MiB; a file changed in place during the run is refused (a rerun rereads it).
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
from array import array
from collections.abc import Container
from pathlib import Path
from typing import BinaryIO

import numpy as np

from dare.harness.engine import EngineBase, EngineContext, GenerationRequest
from dare.harness.errors import InputError
from dare.harness.keyindex import SortedKeys, digest
from dare.harness.options import Capabilities, DecoderInfo
from dare.harness.records import DecodingConfig, Generation, ModelInfo

MAX_LISTED = 5


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - MAX_LISTED} more" if len(items) > MAX_LISTED else ""
    return ", ".join(items[:MAX_LISTED]) + more


class Completions:
    """Where each completion of a completions file is: per line, its id's digest and (byte offset, length of
    the file line, which of the text lines it splits into), k lines of an id in file order."""

    def __init__(self, path: Path, fd: int, rows: SortedKeys):
        self.path, self.fd, self.rows = path, fd, rows
        self.stat = os.fstat(fd)
        weakref.finalize(self, os.close, fd)

    def __len__(self) -> int:
        return len(self.rows)

    def count(self, sample_id: str) -> int:
        return len(self.rows.positions(sample_id))

    def most(self) -> int:
        """The most completions one id has."""
        pairs = np.stack([np.frombuffer(self.rows.hi, dtype=np.uint64), np.frombuffer(self.rows.lo, dtype=np.uint64)])
        return int(np.unique(pairs, axis=1, return_counts=True)[1].max())

    def unknown(self, known: Container[str]) -> list[str]:
        """The file's ids that ``known`` lacks, sorted; each is read back from its first line (``known`` a
        :class:`SortedKeys` is asked by digest, so only the ids it lacks are read)."""
        hi, lo = np.frombuffer(self.rows.hi, dtype=np.uint64), np.frombuffer(self.rows.lo, dtype=np.uint64)
        if isinstance(known, SortedKeys):
            return sorted({str(self._row(i)["id"]) for i in np.flatnonzero(~known.contains(hi, lo))})
        firsts = np.flatnonzero(np.r_[True, (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])])  # one line per id
        return sorted({i for i in (str(self._row(j)["id"]) for j in firsts) if i not in known})

    def text(self, sample_id: str, index: int) -> str:
        row = self._row(self.rows.positions(sample_id)[index])
        if str(row["id"]) != sample_id:  # two ids with one 128-bit digest: never expected
            raise InputError(f"completions file {self.path}: cannot tell id {sample_id} from {row['id']}")
        return row["completion"]

    def _row(self, i: int) -> dict:
        now = os.fstat(self.fd)
        if (now.st_size, now.st_mtime_ns) != (self.stat.st_size, self.stat.st_mtime_ns):
            raise InputError(f"completions file {self.path} changed while this run read it; rerun the command")
        offset, length, sub = (c[i] for c in self.rows.columns)
        line = os.pread(self.fd, length, offset).decode("utf-8", errors="replace").splitlines()[sub]
        return json.loads(line)


class ReplayEngine(EngineBase):
    """Serves generations from a completions file instead of a model. It decodes nothing, so it reads
    no DecodingConfig field but k: a replay record holds no decoding settings it never used."""

    name = "replay"
    version = "1"
    capabilities = Capabilities(reads_completions=True, needs_checkpoint=False, decoding_defaults=True)

    def __init__(self, ctx: EngineContext):
        if ctx.completions is None:
            raise InputError("--backend replay needs --completions FILE (JSONL with id and completion per line)")
        super().__init__(ctx)
        self.path = ctx.completions
        self.completions, self.sha256 = self._read(self.path)

    @staticmethod
    def _read(path: Path) -> tuple[Completions, str]:
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise InputError(f"completions file {path} does not exist") from None
        except OSError as exc:
            raise InputError(f"cannot read completions file {path}: {exc.strerror}") from None
        with f:
            try:
                rows, sha256, problems = _index(f)
            except OSError as exc:
                raise InputError(f"cannot read completions file {path}: {exc.strerror}") from None
            if problems:
                raise InputError(f"completions file {path}: {len(problems)} malformed line(s): {_listed(problems)}")
            if not len(rows):
                raise InputError(f"completions file {path} holds no completions")
            return Completions(path, os.dup(f.fileno()), rows), sha256

    def decoding_defaults(self) -> dict:
        """k = the largest number of completions given for one sample."""
        return {"num_samples": self.completions.most()}

    def decoder(self, decoding: DecodingConfig) -> DecoderInfo:
        return DecoderInfo(name="replay", version=self.version, reads=frozenset(), catalog={"replay": frozenset()})

    def model_info(self) -> ModelInfo:
        return ModelInfo(name=self.ctx.model_name, fingerprint=f"replay-{self.sha256}",
                         fingerprint_parts={"completions_file": str(self.path), "sha256": self.sha256})

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        known = self.ctx.sample_ids or {r.sample_id for r in requests}
        unknown = self.completions.unknown(known)
        if unknown:
            raise InputError(f"completions file {self.path} has {len(unknown)} id(s) "
                             f"that are not samples of this suite: {_listed(unknown)}")
        missing = sorted({r.sample_id for r in requests if self.completions.count(r.sample_id) <= r.index})
        if missing:
            raise InputError(
                f"completions file {self.path} lacks completions for {len(missing)} sample(s) "
                f"(each needs {decoding.num_samples}): {_listed(missing)}; add them or use --limit"
            )

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        return [Generation(sample_id=r.sample_id, index=r.index, text=self.completions.text(r.sample_id, r.index),
                           finish_reason="replay")
                for r in requests]


def _index(f: BinaryIO) -> tuple[SortedKeys, str, list[str]]:
    """One pass over a completions file: where each completion is, the file's sha256, and every problem."""
    h = hashlib.sha256()
    hi, lo, offsets, lengths, subs = array("Q"), array("Q"), array("q"), array("q"), array("q")
    problems: list[str] = []
    lineno = offset = 0
    for raw in f:  # a file line; splitlines() may cut it in more, as it would cut the whole text
        h.update(raw)
        for sub, line in enumerate(raw.decode("utf-8", errors="replace").splitlines()):
            lineno += 1
            if not line.strip():
                continue
            row, problem = _parse(line, lineno)
            if problem:
                problems.append(problem)
            else:
                d = digest(str(row["id"]))
                hi.append(d[0]), lo.append(d[1]), offsets.append(offset), lengths.append(len(raw)), subs.append(sub)
        offset += len(raw)
    return SortedKeys(hi, lo, offsets, lengths, subs), h.hexdigest(), problems


def _parse(line: str, lineno: int) -> tuple[dict, str | None]:
    """One line of a completions file, and what is wrong with it (None: nothing)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        return {}, f"line {lineno} is not JSON ({exc.msg})"
    if not isinstance(row, dict) or "id" not in row or "completion" not in row:
        return {}, f"line {lineno} needs the keys 'id' and 'completion'"
    if not isinstance(row["id"], (str, int)) or isinstance(row["id"], bool):
        return row, f"line {lineno}: 'id' must be a string or integer"
    if not isinstance(row["completion"], str):
        return row, f"line {lineno}: 'completion' must be a string"
    return row, None
