"""How each code benchmark's rows become programs and test plans (HumanEval, HumanEval+, MBPP, MBPP+).

One :class:`CodeDataset` per benchmark, looked up by name in :data:`DATASETS`. Each says what a
completion continues (the prompt, or nothing), whether DARE's MBPP markers may appear, what the gold
completion is, and how to build the trusted :class:`~.plans.TestPlan` from the row.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Callable

from ..pyast import parse
from ..records import Sample
from .codec import encode
from .evalplus_inputs import mbpp_arguments
from .plans import TestPlan, plan_from_asserts, plan_from_calls, reference_calls
from .pool import Sandbox

# EvalPlus rows are graded by EvalPlus's own rules (compare.EvalPlusRules), special oracles included.
HUMANEVALPLUS_ORACLE = "evalplus:humaneval"
MBPPPLUS_ORACLE = "evalplus:mbpp"


@functools.cache
def humaneval_canonical() -> dict[str, tuple[str, str]]:
    """HumanEval task id -> (prompt, canonical body): the reference for HumanEval+ rows, which ship none."""
    from ..data import load_samples

    return {s.id: (s.prompt, s.metadata["canonical_solution"]) for s in load_samples("humaneval.jsonl")}


def _wire_calls(arg_lists: list) -> list:
    return [encode([list(args), {}]) for args in arg_lists]


# ---------------------------------------------------------------- HumanEval / MBPP: assert-style tests

def plan_humaneval(sample: Sample, sandbox: Sandbox) -> TestPlan:
    meta = sample.metadata
    reference = sample.prompt + meta["canonical_solution"]
    return plan_from_asserts(sandbox, reference, meta["entry_point"], meta["test"], "check", sample.prompt)


def plan_mbpp(sample: Sample, sandbox: Sandbox) -> TestPlan:
    meta = sample.metadata
    setup = (meta.get("test_setup_code") or "").replace("\r\n", "\n")
    test = setup + "\n" + "\n".join(meta["test_list"]) + "\n"
    reference = (sample.reference or meta["canonical_solution"]).replace("\r\n", "\n")
    return plan_from_asserts(sandbox, reference, meta["entry_point"], test, None, reference, setup)


# ---------------------------------------------------------------- HumanEval+: literal inputs and results

def _parse_plus_test(test: str) -> tuple[list, list | None, float, str]:
    """(inputs, results or None, atol, module code defining ``ref_func`` where results are absent)."""
    tree = parse(test)
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    values, atol = {}, 0.0
    for node in check.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = ast.literal_eval(node.value)
        elif isinstance(node, ast.For):
            call = node.body[0].value
            atol = float(ast.literal_eval(call.args[2])) if len(call.args) > 2 else 0.0
    support = [n for n in tree.body if n is not check and not isinstance(n, ast.Expr)]
    return values["inputs"], values.get("results"), atol, ast.unparse(ast.Module(support, []))


def plan_humanevalplus(sample: Sample, sandbox: Sandbox) -> TestPlan:
    meta = sample.metadata
    inputs, results, atol, support = _parse_plus_test(meta["test"])
    calls = _wire_calls(inputs)
    if results is None:  # the test computes expectations with EvalPlus's own reference, ref_func
        plan = plan_from_calls(sandbox, support, "ref_func", calls, [HUMANEVALPLUS_ORACLE] * len(calls), atol)
        return dataclasses.replace(plan, entry_point=meta["entry_point"])
    plan = TestPlan(meta["entry_point"], calls, [encode(r) for r in results], [HUMANEVALPLUS_ORACLE] * len(calls),
                    [None] * len(calls), atol)
    program = gold_humanevalplus(sample)
    if program is not None:  # the original canonical solution gives the time scale
        records, problem = reference_calls(sandbox, sample.prompt + program, meta["entry_point"], calls)
        plan.ref_times = [r.get("t") if r and "ok" in r else None for r in records]
        raised = next((k for k, r in enumerate(records) if r and "err" in r), None)
        if problem is None and raised is not None:
            problem = f"reference raises {records[raised]['err']} on input {raised}"
        plan.golden = {"passed": problem is None, "reason": problem}
    return plan


def gold_humanevalplus(sample: Sample) -> str | None:
    if sample.reference:
        return sample.reference
    found = humaneval_canonical().get(sample.id)
    return found[1] if found else None


# ---------------------------------------------------------------- MBPP+: inputs, reference-computed outputs

def base_and_plus_inputs(meta: dict) -> tuple[list, list]:
    """(base inputs, plus inputs) of an EvalPlus row, as JSON argument lists."""
    # Mbpp/793 ships `{}` for "no plus inputs"; EvalPlus iterates it as no inputs, and so does this.
    return list(meta.get("base_input") or []), list(meta.get("plus_input") or [])


def plan_mbppplus(sample: Sample, sandbox: Sandbox) -> TestPlan:
    meta = sample.metadata
    base, plus = base_and_plus_inputs(meta)
    calls = _wire_calls([mbpp_arguments(sample.id, a) for a in base + plus])
    return plan_from_calls(sandbox, sample.reference or meta["canonical_solution"], meta["entry_point"], calls,
                           [MBPPPLUS_ORACLE] * len(calls), float(meta.get("atol") or 0.0), len(base))


# ---------------------------------------------------------------- the table

@dataclasses.dataclass(frozen=True)
class CodeDataset:
    """``continues_prompt``: a bare completion continues ``sample.prompt`` (HumanEval family)."""

    name: str
    continues_prompt: bool
    strip_markers: bool
    build_plan: Callable[[Sample, Sandbox], TestPlan]
    gold: Callable[[Sample], str | None]


DATASETS = {
    "humaneval": CodeDataset("humaneval", True, False, plan_humaneval, lambda s: s.reference),
    "humanevalplus": CodeDataset("humanevalplus", True, False, plan_humanevalplus, gold_humanevalplus),
    "mbpp": CodeDataset("mbpp", False, True, plan_mbpp, lambda s: s.reference),
    "mbppplus": CodeDataset("mbppplus", False, True, plan_mbppplus, lambda s: s.reference),
}
