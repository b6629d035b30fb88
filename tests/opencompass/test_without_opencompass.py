"""Runs in every environment: without OpenCompass, ``--engine opencompass`` is a one-line error (exit 2)
naming the install command. Where OpenCompass is installed, the import is blocked in the child process."""

from __future__ import annotations

import subprocess
import sys

BLOCK_AND_RUN = (
    "import sys; sys.modules['opencompass'] = None; "  # None in sys.modules makes `import opencompass` fail
    "from dare.harness.cli import main; raise SystemExit(main(sys.argv[1:]))"
)


def test_engine_opencompass_without_the_package_exits_2_with_install_hint(tmp_path):
    proc = subprocess.run([sys.executable, "-c", BLOCK_AND_RUN, "--no-progress", "--engine", "opencompass",
                           "--model", "tiny-llada", "--suite", "sudoku", "--limit", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "opencompass" in lines[0] and "pip install 'dare-dllm[opencompass]'" in lines[0]
    assert not any(tmp_path.iterdir()), "no run directory may be created"
