"""How each code benchmark's rows become programs and test plans (HumanEval, HumanEval+, MBPP, MBPP+).

One :class:`CodeDataset` per benchmark, looked up by name in :data:`DATASETS`. Each says what a
completion continues (the prompt, or nothing), whether DARE's MBPP markers may appear, what the gold
completion is, and how to build the trusted :class:`~.plans.TestPlan` from the row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..records import Sample
from .codec import encode
from .evalplus_inputs import mbpp_arguments
from .plans import TestPlan, plan_from_asserts, plan_from_calls
from .pool import Sandbox

# EvalPlus rows are graded by EvalPlus's own rules (compare.EvalPlusRules), special oracles included.
HUMANEVALPLUS_ORACLE = "evalplus:humaneval"
MBPPPLUS_ORACLE = "evalplus:mbpp"


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


# ---------------------------------------------------------------- HumanEval+, MBPP+: reference-computed outputs

def base_and_plus_inputs(meta: dict) -> tuple[list, list]:
    """(base inputs, plus inputs) of an EvalPlus row, as JSON argument lists."""
    # Mbpp/793 ships `{}` for "no plus inputs"; EvalPlus iterates it as no inputs, and so does this.
    return list(meta.get("base_input") or []), list(meta.get("plus_input") or [])


def plan_humanevalplus(sample: Sample, sandbox: Sandbox) -> TestPlan:
    """EvalPlus runs ``prompt + canonical_solution`` on each input; the inputs are the JSON values as they are."""
    meta = sample.metadata
    base, plus = base_and_plus_inputs(meta)
    calls = _wire_calls(base + plus)
    reference = sample.prompt + (sample.reference or meta["canonical_solution"])
    return plan_from_calls(sandbox, reference, meta["entry_point"], calls, [HUMANEVALPLUS_ORACLE] * len(calls),
                           float(meta.get("atol") or 0.0), len(base))


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
    "humanevalplus": CodeDataset("humanevalplus", True, False, plan_humanevalplus, lambda s: s.reference),
    "mbpp": CodeDataset("mbpp", False, True, plan_mbpp, lambda s: s.reference),
    "mbppplus": CodeDataset("mbppplus", False, True, plan_mbppplus, lambda s: s.reference),
}
