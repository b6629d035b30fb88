"""Run directories: naming, one process per directory, atomic writes of ``run.json`` and ``samples.jsonl``
(readable per the umask), environment facts."""

from __future__ import annotations

import fcntl
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .diskfull import no_room, writing
from .errors import DareError, InputError
from .records import Environment, RunRecord, json_text

SOURCE_ROOT = Path(__file__).resolve().parent.parent


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "model"


def new_run_dir(out: Path, suite: str, model: str, config_hash: str, created: datetime) -> Path:
    """Create a fresh directory ``<out>/<time>_<suite>_<model>_<hash8>`` (suffixed if it exists)."""
    base = f"{created.strftime('%Y%m%dT%H%M%S')}_{slug(suite)}_{slug(model)}_{config_hash[:8]}"
    try:
        with writing(out):
            out.mkdir(parents=True, exist_ok=True)
            for n in range(1000):
                path = out / (base if n == 0 else f"{base}-{n}")
                try:
                    path.mkdir()
                    return path
                except FileExistsError:
                    continue
    except OSError as exc:
        raise InputError(f"cannot create a run directory under {out}: {exc.strerror}; pass a writable --out") from exc
    raise InputError(f"too many runs named {base} under {out}")


def check_writable(out: Path) -> None:
    """Fail early, before any compute, if ``out`` cannot hold run directories."""
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError(f"output directory {out} cannot be created: {probe} is a file; pass a directory as --out")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"output directory {out} is not writable; pass a writable --out")


LOCK_FILE = ".lock"
_held: dict[Path, int] = {}  # directories this process holds -> nesting depth (flock is per open file)


@contextmanager
def hold(directory: Path, busy: str, error: type[DareError] = InputError) -> Iterator[None]:
    """Hold ``directory`` for this process: an advisory lock on ``directory/.lock`` that dies with the
    process, so a killed run never blocks its rerun. A second process gets ``error(busy)`` at once (one
    line, exit 2); the same process may hold a directory again (e.g. a trainer evaluating into its run)."""
    key = Path(directory).resolve()
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    try:
        with writing(key / LOCK_FILE):
            key.mkdir(parents=True, exist_ok=True)
            fh = (key / LOCK_FILE).open("a+")
    except OSError as exc:
        raise InputError(f"cannot lock {directory}: {exc.strerror}; pass a writable directory") from exc
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise error(busy) from None
        _held[key] = 1
        try:
            yield
        finally:
            del _held[key]


@contextmanager
def hold_outputs(*directories: Path) -> Iterator[None]:
    """One dare-eval per output (and cache) directory: a second one would generate everything again and
    append duplicate cache lines."""
    with ExitStack() as stack:
        for directory in dict.fromkeys(Path(d).resolve() for d in directories):  # a cache inside --out: once
            stack.enter_context(hold(directory, f"{directory} is in use by another dare-eval; wait for it to finish "
                                                "(it fills the cache this run would read), or pass another --out"))
        yield


def _umask() -> int:
    """The process umask: from /proc on Linux (reading it with os.umask would change it for a moment,
    under other threads' feet), else by setting and restoring it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, text: str | Iterable[str]) -> None:
    """Write ``path`` (a text, or its pieces: a large file is never held whole) by rename, so a reader never
    sees half a file; the mode is 0666 less the umask, as a plain ``open`` gives (mkstemp alone makes 0600,
    unreadable by the group that shares the runs)."""
    pieces = (text,) if isinstance(text, str) else text
    size = 0
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            for piece in pieces:
                data = piece.encode("utf-8")
                size += len(data)
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)  # a half-written copy would hold the space a rerun needs
        full = no_room(path, exc, size or None) if isinstance(exc, (OSError, RuntimeError)) else None
        if full is not None:  # ``size``: what was known when it failed (all of it for a text)
            raise full from exc
        raise


def write_run(run_dir: Path, record: RunRecord, rows: list[dict[str, Any]]) -> None:
    """Write samples first, then run.json: a run.json always has its samples beside it."""
    atomic_write(run_dir / record.samples_path, (json_text(r) + "\n" for r in rows))
    write_record(run_dir, record)


def write_record(run_dir: Path, record: RunRecord) -> None:
    """``run.json`` (after its samples: see :func:`write_run` and :class:`RowsWriter`)."""
    atomic_write(run_dir / "run.json", json_text(record.to_json(), indent=2) + "\n")


class RowsWriter:
    """``path`` (a JSONL file, e.g. samples.jsonl) written row by row as a run scores its samples, so its
    rows are never held together: into a temporary file beside it, renamed into place by :meth:`commit`
    (a reader never sees half a file; the mode as :func:`atomic_write` gives). Leaving the ``with`` block
    uncommitted (an error, an interruption) removes the temporary file; a lack of room is a DiskFullError
    naming ``path`` and the bytes written so far, as :func:`atomic_write` says it."""

    def __init__(self, path: Path):
        self.path, self.size, self._tmp, self._file = path, 0, None, None

    def __enter__(self) -> RowsWriter:
        with self._room():
            fd, self._tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
            os.fchmod(fd, 0o666 & ~_umask())
            self._file = os.fdopen(fd, "wb")
        return self

    def write(self, row: dict[str, Any]) -> None:
        data = (json_text(row) + "\n").encode("utf-8")
        self.size += len(data)
        with self._room():
            self._file.write(data)

    def commit(self) -> None:
        with self._room():
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self.path)
        self._tmp = None

    def __exit__(self, *exc_info: Any) -> None:
        if self._file is not None and not self._file.closed:
            try:
                self._file.close()
            except OSError:
                pass  # the error being raised already says what went wrong
        if self._tmp is not None:
            Path(self._tmp).unlink(missing_ok=True)  # a half-written copy would hold the space a rerun needs

    @contextmanager
    def _room(self) -> Iterator[None]:
        try:
            yield
        except (OSError, RuntimeError) as exc:
            full = no_room(self.path, exc, self.size or None)
            if full is None:
                raise
            raise full from exc


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(SOURCE_ROOT), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _source_now() -> tuple[str, bool] | None:
    """(HEAD commit, whether tracked files differ from it) of the source tree, or None outside a checkout."""
    commit = _git("rev-parse", "HEAD")
    return None if not commit else (commit, bool(_git("status", "--porcelain", "--untracked-files=no")))


#: the tree as this process's first record found it (one entry once read): a run imports its code when it
#: starts, so a commit or an edit made while it runs (a training's evaluation is recorded at its end) would
#: otherwise name code the run may not have run
_SOURCE_AT_FIRST_RECORD: list[tuple[str, bool] | None] = []


def _cpu_model() -> str | None:
    """The CPU's model name: float kernels (MKL's code path, torch's vector width) are chosen per CPU."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def environment() -> Environment:
    """Python, packages, platform, accelerator and the source commit (with a dirty flag), as the record's
    :class:`~dare.harness.records.Environment`. The commit is the one this process's first record found; the
    flag is also set when HEAD or the tracked files changed since."""
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu": _cpu_model(),
        "dare_version": _version("dare-dllm"),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "math_verify": _version("math-verify"),
    }
    torch = sys.modules.get("torch")  # only describe CUDA if a backend already imported torch
    if torch is not None:  # what float results depend on beyond the versions
        env["torch_threads"] = torch.get_num_threads()
        env["deterministic_algorithms"] = torch.are_deterministic_algorithms_enabled()
        env["cpu_capability"] = torch.backends.cpu.get_cpu_capability()  # the vector kernels torch dispatched to
        if os.environ.get("MKL_CBWR"):  # MKL's reproducibility mode (e.g. COMPATIBLE: one code path on every CPU)
            env["mkl_cbwr"] = os.environ["MKL_CBWR"]
    if torch is not None and torch.cuda.is_available():
        env["cuda"] = torch.version.cuda
        env["gpu"] = torch.cuda.get_device_name(0)
    now = _source_now()
    if not _SOURCE_AT_FIRST_RECORD:
        _SOURCE_AT_FIRST_RECORD.append(now)
    first = _SOURCE_AT_FIRST_RECORD[0]
    if first is not None:
        env["git_commit"] = first[0]
        env["git_dirty"] = first[1] or now != first
    return Environment(**env)


def environment_info() -> dict[str, Any]:
    """:func:`environment` as the plain dict run.json holds (the facts a training run records beside it)."""
    return environment().model_dump(mode="json")
