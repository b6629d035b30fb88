"""Writes that run out of room: a full disk or quota (ENOSPC, EDQUOT) or the file-size limit (EFBIG).

Every writer of a run (the caches, run.json and samples.jsonl, checkpoints, the metrics log) turns such a
failure into one :class:`~dare.harness.errors.DiskFullError` naming the path, the bytes it was writing and
the room there was, so a long run on a shared cluster stops with a line a person can act on (exit 74)
instead of a traceback, and the rerun after freeing space resumes from what was written before.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import DiskFullError

NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
RESUME = "rerun the same command to resume"


def size_text(n: int | None) -> str:
    """``"3.2 MiB"``: bytes as a person reads them."""
    if n is None:
        return "an unknown amount"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the file system that holds ``path`` (or its nearest existing parent)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


def file_size_limit() -> int | None:
    """This process's RLIMIT_FSIZE in bytes (None: unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def no_room(path: Path, exc: BaseException, needed: int | None = None) -> DiskFullError | None:
    """The DiskFullError ``exc`` means, or None when it is no lack of room. An OSError says so by its errno;
    other writers (torch.save's RuntimeError, safetensors) only by the room left: less free space than
    ``needed``, or a file-size limit below it."""
    code = getattr(exc, "errno", None)
    limit = file_size_limit()
    if code == errno.EFBIG or (code is None and needed and limit is not None and limit < needed):
        return DiskFullError(f"cannot write {path}: over this process's file-size limit (RLIMIT_FSIZE "
                             f"{size_text(limit)}, writing {size_text(needed)}); raise it (ulimit -f) and {RESUME}")
    free = free_bytes(path)
    if code in NO_ROOM or (code is None and needed and free is not None and free < needed):
        return DiskFullError(f"no space left to write {path}: {size_text(needed)} needed, {size_text(free)} free "
                             f"there; free space (or write elsewhere: --out, --cache-dir) and {RESUME}")
    return None


@contextmanager
def writing(path: Path, needed: int | None = None) -> Iterator[None]:
    """Turn a lack of room in the block into a :class:`DiskFullError` naming ``path`` and ``needed`` bytes."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        full = no_room(path, exc, needed)
        if full is None:
            raise
        raise full from exc


def append_all(path: Path, data: bytes) -> int:
    """Append ``data`` to ``path`` and fsync, all or nothing: a write cut short (no room, or a signal) is
    truncated away again, so the file never keeps a torn line of ours. A torn line left by a killed
    writer is fenced off with a newline first, so it is never joined to a whole record. Returns the offset
    in the file where ``data`` starts."""
    with writing(path, len(data) + 1):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            fenced = end > 0 and os.pread(fd, 1, end - 1) != b"\n"
            if fenced:
                data = b"\n" + data
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, end)
                raise
        finally:
            os.close(fd)
    return end + fenced
