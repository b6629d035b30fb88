"""``ast.parse`` serialised across threads.

CPython 3.11's AST constructor counts its recursion depth in per-interpreter state, so two threads building
trees at the same time can raise a spurious ``SystemError: AST constructor recursion depth mismatch``
(python/cpython gh-106905). The code verifiers build test plans and check candidates on a thread pool, and
the error reached a gold test run once, so every parse in the harness goes through this one lock.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(source, mode=mode)`` under the process-wide parse lock."""
    with _LOCK:
        return ast.parse(source, mode=mode)
