"""Trusted AST pass that turns assert-style tests into recordable call sites.

Every reference to the tested function inside the test code (``candidate`` in HumanEval's ``check``, the
entry point's name in MBPP's asserts) becomes ``__dare_site__(k)``, a callable the child runner supplies:
in ``record`` mode it calls the reference and logs (arguments, output); in ``judge`` mode it replays the
candidate's outputs. Each site is classified:

- ``eq``: ``assert f(...) == <expr>`` (either side), the other side free of calls to ``f``: the expected
  output is the reference's output on the recorded arguments;
- ``truthy`` / ``falsy``: ``assert f(...)`` / ``assert not f(...)``;
- ``judge``: anything else (property checks, ``set(f(x)) == ...``, ``f`` passed as a value). A task with
  any judge site is decided by re-running its tests in a separate process with the candidate's outputs
  replayed, so no assert ever runs in the candidate's interpreter.
"""

from __future__ import annotations

import ast
import dataclasses

from ..pyast import parse

SITE = "__dare_site__"


@dataclasses.dataclass(frozen=True)
class RewrittenTest:
    """``source`` is the rewritten test code; ``site_kinds[k]`` classifies call site ``k``;
    ``site_args[k]`` is the source of ``((args...), {kwargs})`` at a convertible site (None elsewhere)."""

    source: str
    site_kinds: tuple[str, ...]
    site_args: tuple[str | None, ...] = ()

    @property
    def needs_judge(self) -> bool:
        return any(kind == "judge" for kind in self.site_kinds)


def _is_target_call(node: ast.AST, target: frozenset[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in target


def _mentions(node: ast.AST, target: frozenset[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in target for n in ast.walk(node))


def _args_source(call: ast.Call) -> str | None:
    if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    pair = ast.Tuple([ast.Tuple(list(call.args), ast.Load()),
                      ast.Dict([ast.Constant(k.arg) for k in call.keywords], [k.value for k in call.keywords])],
                     ast.Load())
    return ast.unparse(pair)


def _classify_asserts(tree: ast.AST, target: frozenset[str]) -> dict[int, str]:
    """id(Call node) -> kind, for the call sites whose assert has a convertible shape."""
    kinds: dict[int, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        test = node.test
        if _is_target_call(test, target) and not any(_mentions(a, target) for a in (*test.args, *test.keywords)):
            kinds[id(test)] = "truthy"
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_target_call(test.operand, target):
            if not any(_mentions(a, target) for a in (*test.operand.args, *test.operand.keywords)):
                kinds[id(test.operand)] = "falsy"
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
            left, right = test.left, test.comparators[0]
            for call, other in ((left, right), (right, left)):
                if _is_target_call(call, target) and not _mentions(other, target) and not any(
                        _mentions(a, target) for a in (*call.args, *call.keywords)):
                    kinds[id(call)] = "eq"
                    break
    return kinds


class _SiteRewriter(ast.NodeTransformer):
    def __init__(self, target: frozenset[str], convertible: dict[int, str]):
        self.target, self.convertible, self.kinds, self.args = target, convertible, [], []

    def _site(self, kind: str, like: ast.AST, args: str | None = None) -> ast.Call:
        self.kinds.append(kind)
        self.args.append(args)
        site = ast.Call(func=ast.Name(id=SITE, ctx=ast.Load()), args=[ast.Constant(len(self.kinds) - 1)], keywords=[])
        return ast.copy_location(site, like)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        kind = self.convertible.get(id(node))
        if kind is None:
            return self.generic_visit(node)
        site = self._site(kind, node.func, _args_source(node))  # the arguments never mention the target
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        node.func = site
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.target and isinstance(node.ctx, ast.Load):
            return self._site("judge", node)
        return node


def rewrite(test_source: str, target: str, call_after: str | None = None) -> RewrittenTest:
    """Rewrite ``test_source`` so that every use of ``target`` (the tested function's name) goes through a site.

    ``call_after``: a function defined by the test to call at the end (HumanEval's ``check``), whose
    first parameter is then a second name of the tested function.
    """
    tree = parse(test_source)
    names = {target}
    if call_after is not None:
        checker = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == call_after), None)
        if checker is None or not checker.args.args:
            raise ValueError(f"test code defines no {call_after}(candidate)")
        names.add(checker.args.args[0].arg)
    targets = frozenset(names)
    rewriter = _SiteRewriter(targets, _classify_asserts(tree, targets))
    tree = ast.fix_missing_locations(rewriter.visit(tree))
    source = ast.unparse(tree)
    if call_after is not None:
        source += f"\n{call_after}(None)\n"
    return RewrittenTest(source, tuple(rewriter.kinds), tuple(rewriter.args))
