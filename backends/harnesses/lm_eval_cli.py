"""``dare-lm-eval``: lm-eval's own CLI with DARE's ``dare`` model registered, and DARE's run record of each task.

lm-eval 0.4.13 finds models only in its own registry (a fixed table of its modules; no entry-point group), so
this command registers :class:`~.lm_eval_model.DareLM` and hands every argument over to lm-eval's CLI
unchanged: ``dare-lm-eval run --model dare --model_args model=tiny-sdar,... --tasks ...`` is
``lm-eval run ...`` with one more model. For a run of the ``dare`` model it then writes a DARE run directory
per task under the ``out`` model arg (default ``runs``), from the results and samples lm-eval wrote (it adds
``--log_samples``, and ``--output_path`` into a temporary directory where none is given).
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from dare.harness.cliutil import Parser, emit, run_cli
from dare.harness.errors import PrerequisiteError

log = logging.getLogger(__name__)
INSTALL = "pip install 'dare-dllm[lmeval]'"
SUBCOMMANDS = ("run", "ls", "validate")


def build_parser() -> Parser:
    """Only ``--version``: every other argument is lm-eval's (``dare-lm-eval --help`` is lm-eval's help)."""
    return Parser(prog="dare-lm-eval", add_help=False, allow_abbrev=False,
                  description="lm-eval's CLI with DARE's dare model registered")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in args:
        build_parser().parse_args(["--version"])  # prints the version line and exits 0
    return run_cli("dare-lm-eval", lambda: _run(args))


def _run(args: list[str]) -> int:
    try:
        from lm_eval._cli import HarnessCLI
    except ImportError as exc:
        raise PrerequisiteError(f"dare-lm-eval needs lm-eval ({exc}); install it: {INSTALL}") from None
    from . import lm_eval_model  # noqa: F401  (registers the dare model)

    runs = bool(args) and (args[0] == "run" or (args[0] not in SUBCOMMANDS and len(args) > 1))
    if not runs:
        return _hand_over(HarnessCLI, args)
    with tempfile.TemporaryDirectory(prefix="dare-lm-eval-") as scratch:
        output = _value(args, "--output_path", "-o")
        if output is None:
            output = scratch
            args = [*args, "--output_path", scratch]
        if "--log_samples" not in args and "-s" not in args:
            args = [*args, "--log_samples"]
        since = time.time() - 1
        code = _hand_over(HarnessCLI, args)
        from .lm_eval_records import read_output, write_records

        found = read_output(Path(output), since) if code == 0 else None
        for run_dir in write_records(*found, ["dare-lm-eval", *args]) if found else []:
            emit(f"dare-lm-eval: run record {run_dir}", err=True)
    return code


def _hand_over(cli_class, args: list[str]) -> int:
    """lm-eval's CLI on ``args`` (it reads sys.argv), its exit status."""
    saved = sys.argv
    sys.argv = ["lm-eval", *args]
    try:
        cli = cli_class()
        cli.execute(cli.parse_args())
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved


def _value(args: list[str], *flags: str) -> str | None:
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None
