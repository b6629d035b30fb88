"""``dare-eval`` in this process, for tests of what it refuses or lists at plan time.

Starting a Python process and importing torch costs seconds per call; a plan-time refusal or ``--list`` needs
neither, so these tests call the CLI's ``main`` with its standard streams captured. The real process (exit code,
one stderr line, no traceback) stays covered by tests/harness/test_cli_errors.py.
"""

from __future__ import annotations

import io
import subprocess
from contextlib import redirect_stderr, redirect_stdout


def dare_eval(*args: str) -> subprocess.CompletedProcess:
    """``dare-eval ARGS`` run by its ``main``: the exit code and what it wrote, as ``subprocess.run`` gives them."""
    from dare.harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["dare-eval", *args], code, out.getvalue(), err.getvalue())
