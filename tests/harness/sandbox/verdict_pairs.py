"""One program, two verdicts: DARE's code verifier and EvalPlus 0.3.1's own ``untrusted_check``, run alone.

Both get the same hand-built task: entry point ``f``, the inputs, the expected outputs, one group of base inputs,
the reference's time per input and the floor of the per-input limit (EvalPlus's ``max(min_time_limit, 4 x t)``).
EvalPlus's check runs in the child process it starts itself, with its own alarm, guard and process timeout.
"""

from __future__ import annotations

import pytest

from dare.harness.sandbox import plans
from dare.harness.sandbox.codec import encode
from dare.harness.verifiers.code import CodeVerifier

REF_TIME = 0.001  # every limit is the floor


def task(inputs: list, outputs: list) -> plans.TestPlan:
    n = len(inputs)
    return plans.TestPlan("f", [encode([list(args), {}]) for args in inputs], [encode(o) for o in outputs],
                          ["evalplus:humaneval"] * n, [REF_TIME] * n, base_count=n)


def dare_verdict(verifier: CodeVerifier, program: str, inputs: list, outputs: list) -> tuple[bool, str | None]:
    outcome = verifier._run(task(inputs, outputs), program)
    return outcome.passed, outcome.failure


def evalplus_verdict(program: str, inputs: list, outputs: list, min_time_limit: float) -> str:
    """``pass``, ``fail`` or ``timeout``, as ``evalplus.evaluate`` gets it (fast_check on)."""
    from evalplus.eval import untrusted_check

    status, _ = untrusted_check("humaneval", program, inputs, "f", outputs, 0.0, [REF_TIME] * len(inputs),
                                fast_check=True, min_time_limit=min_time_limit, gt_time_limit_factor=4.0)
    return status


def verifier_fixture(min_time_limit: float):
    """A module-scoped ``code_verifier`` fixture whose per-input limit floor is ``min_time_limit``."""

    @pytest.fixture(scope="module")
    def code_verifier(tmp_path_factory):
        made = CodeVerifier("humanevalplus", workers=1, cache_dir=tmp_path_factory.mktemp("plans"),
                            min_time_limit=min_time_limit)
        yield made
        made.close()

    return code_verifier
