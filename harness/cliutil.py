"""The kit every command-line tool is built from (dare-eval, dare-train, dare-leaderboard, OpenCompass's).

- :class:`Parser`: argparse with one-line errors (exit 2) and ``--version`` on the tool and each subcommand;
- :func:`add_set_argument`: the one ``--set KEY=VALUE`` flag (its grammar: :mod:`dare.harness.overrides`);
- :func:`run_cli`: the one mapping from errors to exit codes.

Exit codes, the same for every tool: 0 success, 2 bad input (a :class:`DareError`, one line on stderr, no
traceback; a subclass may declare another ``exit_code``), 74 out of disk space (the line names the path and
the space needed; free space and rerun to resume), 75 stopped at a safe point by SIGTERM or SIGINT within the
grace period (:mod:`dare.harness.stopping`; rerun to resume), 128 + N stopped at once by a second signal N or
at the end of the grace period (143 SIGTERM, 130 SIGINT: the work in flight is lost, the rest kept), 1
internal error (any other exception: Python prints its traceback and exits 1, since an internal error must
show where it happened).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from .errors import DareError, Stopped
from .stopping import Interrupted

INTERRUPTED = 130  # what a shell reports for a process ended by SIGINT


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and ``--version``: the usage block would bury the message.

    ``tool`` names the program in the version line (default ``prog``), so a subcommand's ``--version``
    (``dare-leaderboard build --version``) prints the tool's line, not ``dare-leaderboard build``.
    """

    def __init__(self, *args: Any, tool: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.tool = tool or self.prog
        self.add_argument("--version", action="version", version=version_line(self.tool),
                          help="print the installed dare-dllm version and exit")

    def add_subparsers(self, **kwargs: Any) -> Any:
        """Subcommands are Parsers too (one-line errors, ``--version``)."""
        kwargs.setdefault("parser_class", functools.partial(Parser, tool=self.tool))
        return super().add_subparsers(**kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def version_line(tool: str) -> str:
    """``"dare-eval 0.4.0"``: what every tool's ``--version`` prints."""
    return f"{tool} {package_version()}"


def add_set_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """The ``--set KEY=VALUE`` flag (repeatable, collected in ``args.overrides``), declared once for all tools."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help)


def positive_seconds(text: str) -> float:
    """argparse type of a duration flag (``--grace``): a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def add_grace_argument(parser: argparse.ArgumentParser, setting: str | None = None) -> None:
    """``--grace SECONDS``: how long a run may take to stop after SIGTERM or SIGINT (see :mod:`.stopping`);
    ``setting``: the config field it sets, which holds the default (None: the flag's own default)."""
    from .stopping import DEFAULT_GRACE_S

    parser.add_argument("--grace", type=positive_seconds, default=None if setting else DEFAULT_GRACE_S,
                        metavar="SECONDS", help="after SIGTERM or Ctrl-C, finish the batch or step in flight, save "
                        f"and exit 75 within this many seconds (default {DEFAULT_GRACE_S:g}"
                        + (f", or the config's {setting}" if setting else "") + "; a second signal exits at once)")


def emit(text: object, *, err: bool = False) -> None:
    """The tools' output layer: ``text`` and a newline on stdout (the results a caller reads), or on stderr
    for notes beside them. Library code logs instead."""
    (sys.stderr if err else sys.stdout).write(f"{text}\n")


def run_cli(prog: str, body: Callable[[], int], interrupted: Callable[[], str] | None = None) -> int:
    """``body()``'s exit code, with every tool's errors mapped the same way (see the module docstring).

    A :class:`DareError` becomes ``PROG: error: MESSAGE`` on stderr and its ``exit_code``. For tools that
    can resume, ``interrupted()`` says how (``"rerun the same command to resume"``): a stop at a safe point
    (:class:`Stopped`, 75) becomes ``PROG: MESSAGE; `` + that, and a KeyboardInterrupt ``PROG: interrupted; ``
    + that, with 128 + the signal's number (130 for Ctrl-C). Without ``interrupted`` a KeyboardInterrupt
    propagates, as Python's own handling is then the honest one.
    """
    try:
        return body()
    except Stopped as exc:
        sys.stderr.write(f"{prog}: {exc}" + (f"; {interrupted()}" if interrupted else "") + "\n")
        return exc.exit_code
    except DareError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if interrupted is None:
            raise
        what = str(exc) if isinstance(exc, Interrupted) else "interrupted"
        sys.stderr.write(f"{prog}: {what}; {interrupted()}\n")
        return exc.exit_code if isinstance(exc, Interrupted) else INTERRUPTED


def progress_bars(enabled: bool) -> Callable[[str, int], Any] | None:
    """A factory of tqdm bars on stderr, ``(description, total) -> bar``, or None when disabled."""
    if not enabled:
        return None
    from tqdm import tqdm

    return lambda desc, total: tqdm(total=total, desc=desc, unit="it", file=sys.stderr, dynamic_ncols=True)


def package_version() -> str:
    """The installed distribution's version (the source tree's when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dare-dllm")
    except PackageNotFoundError:
        from dare import __version__

        return __version__


def check_device(device: str | None) -> None:
    """Refuse a ``--device`` this machine cannot run before anything is loaded (PrerequisiteError, exit 2)."""
    if not device:
        return
    import torch

    from .errors import InputError, PrerequisiteError

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise InputError(f"--device {device!r} is not a torch device (use cpu, cuda or cuda:N): {exc}") from exc
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise PrerequisiteError(f"--device {device}: no CUDA device is available "
                                    f"(torch {torch.__version__}, {build}); "
                                    "use --device cpu, or install a CUDA build of torch on a machine with a GPU")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise InputError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    elif parsed.type == "mps" and not torch.backends.mps.is_available():
        raise PrerequisiteError(f"--device {device}: MPS is not available here; use --device cpu")
