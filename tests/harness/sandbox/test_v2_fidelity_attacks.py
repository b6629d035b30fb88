"""Grading fidelity (class 7 of the v2 review): what the original tests and EvalPlus fail must fail here.

The attacks pass a lossy grader and fail the original: a large expected output that used to be dropped
(HumanEval+/83 ``if n > 4000: return 0``), numpy results where the test expects plain values (an array
is not a list; ``np.bool_`` is not ``True`` for ``is``), wrong booleans on the match-object tasks, and
wrong answers on EvalPlus's special-oracle tasks. Each runs next to its task's gold (1 and 2 slots, twice).

Then EvalPlus itself is the reference: for candidates on every MBPP+ special-oracle task, our verdict must
equal ``evalplus.eval.untrusted_check`` (evalplus 0.3.1) on the same inputs, with expected outputs from
evalplus's own ``trusted_exec``. These candidates are ours and benign, so running them in-process there is
safe; the hostile ones above never leave the sandbox.
"""

from __future__ import annotations

import json

import pytest

from dare.harness.data import load_samples
from dare.harness.sandbox.codec import decode
from dare.harness.verifiers.code import CodeVerifier

from .test_v2_decoding_attacks import grade_next_to_gold


def code(body: str) -> str:
    return "```python\n" + body + "```\n"


# name -> (dataset, task, completion, accepted failure kinds)
ATTACKS = {
    "humanevalplus_83_drops_large_outputs": ("humanevalplus", "HumanEval/83", code(
        "def starts_one_ends(n):\n    if n > 4000:\n        return 0\n    if n == 1:\n        return 1\n"
        "    return 18 * 10 ** (n - 2)\n"), {"wrong_answer"}),
    "humanevalplus_numpy_array_for_list": ("humanevalplus", "HumanEval/29", code(
        "import numpy as np\ndef filter_by_prefix(strings, prefix):\n"
        "    return np.array([x for x in strings if x.startswith(prefix)])\n"), {"wrong_answer"}),
    "humaneval_numpy_bool_for_is_true": ("humaneval", "HumanEval/72", code(
        "import numpy as np\ndef will_it_fly(q, w):\n    return np.bool_(sum(q) <= w and q == q[::-1])\n"),
        {"wrong_answer"}),
    "mbpp_numpy_array_for_nested_list": ("mbpp", "12", code(
        "import numpy as np\ndef sort_matrix(M):\n    return np.array(sorted(M, key=sum))\n"), {"wrong_answer"}),
    "mbppplus_numpy_array_for_list": ("mbppplus", "Mbpp/4", code(
        "import heapq, numpy as np\ndef heap_queue_largest(nums, n):\n    return np.array(heapq.nlargest(n, nums))\n"),
        {"wrong_answer"}),
    "mbppplus_737_inverted_bool": ("mbppplus", "Mbpp/737", code(
        "import re\ndef check_str(string):\n    return re.search('^[aeiouAEIOU][A-Za-z0-9_]*', string) is None\n"),
        {"wrong_answer"}),
    "mbppplus_787_inverted_bool": ("mbppplus", "Mbpp/787", code(
        "import re\ndef text_match_three(text):\n    return re.search('ab{3}?', text) is None\n"), {"wrong_answer"}),
    "mbppplus_558_neither_oracle": ("mbppplus", "Mbpp/558", code(
        "def digit_distance_nums(n1, n2):\n    return abs(n1 - n2)\n"), {"wrong_answer"}),
    "mbppplus_581_neither_oracle": ("mbppplus", "Mbpp/581", code(
        "def surface_Area(b, s):\n    return b * s\n"), {"wrong_answer"}),
    "mbppplus_2_set_oracle_extra_member": ("mbppplus", "Mbpp/2", code(
        "def similar_elements(a, b):\n    return tuple(set(a) & set(b)) + (object(),)\n"), {"wrong_answer"}),
}


@pytest.fixture(scope="module", params=[1, pytest.param(2, marks=pytest.mark.extended)], ids=["1-slot", "2-slots"])
def graded(request, tmp_path_factory):
    return grade_next_to_gold(ATTACKS, request.param, tmp_path_factory.mktemp("plans"))[0]


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_fidelity_attack_fails_next_to_a_passing_gold(graded, name):
    verdicts = graded[name]
    for verdict in verdicts["attack"]:
        assert verdict.status == "scored" and verdict.passed is False, verdict.details
        assert verdict.details.get("failure") in ATTACKS[name][3], verdict.details
    first, second = verdicts["attack"]
    assert (first.details.get("failure"), first.details.get("first_failure", {}).get("test")) == (
        second.details.get("failure"), second.details.get("first_failure", {}).get("test"))
    assert all(v.passed for v in verdicts["gold"]), [v.details for v in verdicts["gold"]]


def test_humanevalplus_83_keeps_every_input(graded, tmp_path):
    """The reference's huge outputs (18 * 10**999998 for n = 10**6) are expected outputs, not dropped inputs."""
    sample = next(s for s in load_samples("humanevalplus.jsonl") if s.id == "HumanEval/83")
    verifier = CodeVerifier("humanevalplus", workers=1, cache_dir=tmp_path)
    try:
        plan = verifier.plan_for(sample)
    finally:
        verifier.close()
    n_inputs = len(sample.metadata["base_input"]) + len(sample.metadata["plus_input"])
    assert len(plan.calls) == n_inputs == 109 and plan.base_count == 5 and "dropped_inputs" not in plan.golden
    big = [decode(e) for c, e in zip(plan.calls, plan.expected) if decode(c)[0] == [10 ** 6]]
    assert big == [18 * 10 ** (10 ** 6 - 2)]
    assert graded["humanevalplus_83_drops_large_outputs"]["gold"][0].details["tests_passed"] == 109


# ---------------------------------------------------------------- EvalPlus's own verdicts as the reference

# (task, candidate body): right by a special oracle only, wrong, bool for match objects, and the like
AGAINST_EVALPLUS = [
    ("Mbpp/164", "def are_equivalent(num1, num2):\n    return 'anything'\n"),      # the oracle accepts any value
    ("Mbpp/164", "def are_equivalent(num1, num2):\n    raise ValueError\n"),
    ("Mbpp/295", "def sum_div(number):\n    return 0\n"),                           # 0 is accepted as well
    ("Mbpp/295", "def sum_div(number):\n    return 1\n"),
    ("Mbpp/558", "def digit_distance_nums(n1, n2):\n    a, b = str(n1), str(n2)\n    k = max(len(a), len(b))\n"
                 "    return sum(abs(int(x) - int(y)) for x, y in zip(a.zfill(k), b.zfill(k)))\n"),
    ("Mbpp/558", "def digit_distance_nums(n1, n2):\n    return abs(n1 - n2)\n"),
    ("Mbpp/581", "import math\ndef surface_Area(b, h):\n"
                 "    return round(b * b + 2 * b * math.sqrt((b / 2) ** 2 + h * h))\n"),
    ("Mbpp/581", "def surface_Area(b, s):\n    return b * s\n"),
    ("Mbpp/737", "import re\ndef check_str(string):\n"
                 "    return re.search('^[aeiouAEIOU][A-Za-z0-9_]*', string) is not None\n"),
    ("Mbpp/737", "import re\ndef check_str(string):\n    return re.search('^[aeiouAEIOU][A-Za-z0-9_]*', string) is None\n"),
    ("Mbpp/787", "import re\ndef text_match_three(text):\n    return bool(re.search('ab{3}?', text))\n"),
    ("Mbpp/787", "def text_match_three(text):\n    return None\n"),
    ("Mbpp/2", "def similar_elements(a, b):\n    return list(set(b) & set(a))[::-1]\n"),
    ("Mbpp/2", "def similar_elements(a, b):\n    return tuple(set(a) | set(b))\n"),
    ("Mbpp/4", "import heapq, numpy as np\ndef heap_queue_largest(nums, n):\n    return np.array(heapq.nlargest(n, nums))\n"),
]


def evalplus_verdict(sample, program: str, inputs: list) -> bool:
    from evalplus.eval import untrusted_check
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS
    from evalplus.gen.util import trusted_exec

    entry = sample.metadata["entry_point"]
    expected, ref_time = trusted_exec(sample.reference, inputs, entry, record_time=True,
                                      output_not_none=entry in MBPP_OUTPUT_NOT_NONE_TASKS)
    status, _ = untrusted_check("mbpp", program, inputs, entry, expected, float(sample.metadata.get("atol") or 0),
                                [max(t, 0.05) for t in ref_time], fast_check=True, min_time_limit=2.0)
    return status == "pass"


@pytest.fixture(scope="module")
def mbppplus(tmp_path_factory):
    # v0.1.0: it still has Mbpp/164 and Mbpp/295 (deleted in v0.2.0), whose special oracles are checked here
    samples = {s.id: s for s in load_samples("mbppplus_v0.1.0.jsonl")}
    verifier = CodeVerifier("mbppplus", workers=2, cache_dir=tmp_path_factory.mktemp("plans"), min_time_limit=2.0)
    try:
        ours = verifier.verify_batch([(samples[t], code(body)) for t, body in AGAINST_EVALPLUS])
        plans = {t: verifier.plan_for(samples[t]) for t, _ in AGAINST_EVALPLUS}
    finally:
        verifier.close()
    return samples, plans, ours


@pytest.mark.parametrize("k", range(len(AGAINST_EVALPLUS)), ids=[f"{t}-{i}" for i, (t, _) in enumerate(AGAINST_EVALPLUS)])
def test_verdict_equals_evalplus_untrusted_check(mbppplus, k):
    samples, plans, ours = mbppplus
    task, body = AGAINST_EVALPLUS[k]
    inputs = [list(decode(call)[0]) for call in plans[task].calls]
    expected = evalplus_verdict(samples[task], body, inputs)
    assert ours[k].status == "scored"
    assert ours[k].passed is expected, json.dumps(ours[k].details)[:500]


def test_the_reference_cases_are_not_vacuous(mbppplus):
    """Both outcomes occur, and the special oracles really accept what the reference itself would not."""
    _, _, ours = mbppplus
    assert {v.passed for v in ours} == {True, False}
    by_task = {}
    for (task, _), verdict in zip(AGAINST_EVALPLUS, ours):
        by_task.setdefault(task, []).append(verdict.passed)
    assert by_task["Mbpp/164"] == [True, False] and by_task["Mbpp/558"][0] and by_task["Mbpp/581"][0]
    assert by_task["Mbpp/737"] == [True, False] and by_task["Mbpp/787"] == [True, False]
