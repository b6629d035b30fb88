"""Every parse in the harness goes through harness.pyast's lock (CPython 3.11's AST constructor is not safe
to run in two threads at once: python/cpython gh-106905; the code verifiers parse on a thread pool)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dare.harness import pyast

HARNESS = Path(pyast.__file__).resolve().parent


def test_no_module_calls_ast_parse_but_the_locked_one():
    direct = [str(p.relative_to(HARNESS)) for p in HARNESS.rglob("*.py")
              if p.name != "pyast.py" and re.search(r"\bast\.parse\(", p.read_text())]
    assert direct == [], f"call dare.harness.pyast.parse instead of ast.parse in {direct}"


def test_parse_from_many_threads_gives_the_same_trees():
    source = "def f(x):\n    return [[(x, {i: [i] * 3}) for i in range(x)] for _ in range(2)]\n" * 40
    expected = pyast.ast.dump(pyast.parse(source))
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(lambda _: pyast.ast.dump(pyast.parse(source)), range(64))) == {expected}
