"""A real third-party plugin distribution, made on disk for tests.

It is a ``.dist-info`` folder plus a module on a directory that tests put on ``PYTHONPATH``:
``importlib.metadata`` finds its ``dare.plugins`` entry point exactly as it would for a pip-installed
package. The plugin registers the ``sudoku-solver`` engine, which solves the 4x4 puzzle found in the
prompt by search (deterministic, so it has a known accuracy) and sleeps ``delay`` seconds per batch so
that a test can kill a run part-way, and counts its generations in a file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

MODULE = textwrap.dedent('''
    import os, re, time
    from dare.harness.registry import engines
    from dare.harness.records import Generation, ModelInfo

    def solve(puzzle):
        cells = list(puzzle)
        def ok(i, d):
            r, c = divmod(i, 4)
            peers = {cells[r * 4 + j] for j in range(4)} | {cells[j * 4 + c] for j in range(4)}
            br, bc = r // 2 * 2, c // 2 * 2
            peers |= {cells[(br + a) * 4 + bc + b] for a in range(2) for b in range(2)}
            return d not in peers
        def search(i):
            if i == 16:
                return True
            if cells[i] != "0":
                return search(i + 1)
            for d in "1234":
                if ok(i, d):
                    cells[i] = d
                    if search(i + 1):
                        return True
            cells[i] = "0"
            return False
        return "".join(cells) if search(0) else puzzle

    class SudokuSolverEngine:
        name = "sudoku-solver"
        version = "1"
        def __init__(self, ctx):
            self.delay = float(ctx.options.get("delay", 0))
            self.counter = ctx.options.get("counter")
            self.ctx = ctx
        def model_info(self):
            return ModelInfo(name=self.ctx.model_name, fingerprint="sudoku-solver-1")
        def prepare(self, requests, decoding):
            pass
        def generate(self, requests, decoding):
            time.sleep(self.delay)
            out = []
            for r in requests:
                puzzle = re.findall(r"[0-4]{16}", r.messages[-1].content)[-1]
                out.append(Generation(sample_id=r.sample_id, index=r.index, text=f"<answer>{solve(puzzle)}</answer>"))
            if self.counter:
                with open(self.counter, "a") as f:
                    f.write(f"{len(requests)}\\n")
            return out

    engines.register("sudoku-solver", SudokuSolverEngine)
    SudokuSolverEngine.needs_checkpoint = False
''')


def make_plugin(root: Path) -> Path:
    """Write the plugin distribution under ``root``; returns the directory to put on PYTHONPATH."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "dare_testplugin.py").write_text(MODULE)
    info = root / "dare_testplugin-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dare-testplugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[dare.plugins]\ntestplugin = dare_testplugin\n")
    return root
