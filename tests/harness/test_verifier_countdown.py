"""Countdown verifier: safe parsing, each number exactly once, exact value, and solvable shipped data."""

from __future__ import annotations

import json

import pytest

from dare.harness.data import load_samples
from dare.harness.records import Sample
from dare.harness.verifiers import verifiers
from dare.harness.verifiers.countdown import CountdownVerifier, ExpressionError, evaluate_expression, solve

NUMBERS, TARGET = [30, 100, 93], 23


@pytest.fixture(scope="module")
def verifier():
    return CountdownVerifier()


def sample(numbers=NUMBERS, target=TARGET) -> Sample:
    return Sample(id="c", prompt="p", reference=str(target), metadata={"numbers": numbers, "target": target})


def check(v, completion, numbers=NUMBERS, target=TARGET):
    verdict = v.verify(sample(numbers, target), completion)
    assert verdict.status == "scored"
    return verdict


@pytest.mark.parametrize(
    "completion",
    [
        "<answer>\n30 - (100 - 93)\n</answer>",
        "<answer>30-100+93</answer>",
        "<reasoning>try 30+93=123</reasoning>\n<answer> (93 - 100) + 30 </answer>",
        r"<answer>\boxed{30 - (100 - 93)}</answer>",  # d1 asks for a box inside the tags
        r"the answer: \boxed{30 + 93 - 100}",
        "<answer>30 - (100 - 93) = 23</answer>",  # a trailing "= target" is tolerated
        r"<answer>$30 - \left(100 - 93\right)$</answer>",
        "<answer>-100 + 93 + 30</answer>",  # unary minus uses no extra number
        "<answer>30 − [100 − 93]</answer>",
    ],
)
def test_correct_answers(verifier, completion):
    verdict = check(verifier, completion)
    assert verdict.passed and verdict.score == 1.0 and verdict.details["format_ok"]


@pytest.mark.parametrize(
    "completion, reason",
    [
        ("no tags at all 30 - (100 - 93)", "no_answer"),
        ("<answer>30 + 100 - 93</answer>", "wrong_value"),
        ("<answer>30 - (100 - 93) - 0</answer>", "wrong_numbers"),  # an extra literal
        ("<answer>100 - 93 + 16</answer>", "wrong_numbers"),  # 30 missing, 16 not given
        ("<answer>30 - (100 - 93) + 93 - 93</answer>", "wrong_numbers"),  # 93 used three times
        ("<answer>30 - (100 - 93) = 24</answer>", "equals_sign"),  # "=" with anything but the target
        ("<answer>23 = 30 - (100 - 93)</answer>", "equals_sign"),
        ("<answer>30 - (100 - 93) ** 1</answer>", "invalid_expression"),  # power is not allowed
        ("<answer>30 % 100 + 93</answer>", "invalid_expression"),
        ("<answer>__import__('os').system('true')</answer>", "invalid_expression"),
        ("<answer>30.0 - (100 - 93)</answer>", "invalid_expression"),  # integer literals only
        ("<answer>30 - 7</answer> <answer>oops</answer>", "invalid_expression"),  # the last block counts
        ("<answer>(30 - (100 - 93)</answer>", "invalid_expression"),
    ],
)
def test_wrong_answers(verifier, completion, reason):
    verdict = check(verifier, completion)
    assert not verdict.passed and verdict.score == 0.0 and verdict.details["reason"] == reason


def test_division(verifier):
    zero = check(verifier, "<answer>12 / (6 - 6) + 1</answer>", [12, 6, 6, 1], 3)
    assert not zero.passed and zero.details["error"] == "division by zero"
    assert check(verifier, "<answer>(6 / 4) * 2</answer>", [6, 4, 2], 3).passed  # exact fractions
    assert check(verifier, "<answer>1 / 3 * 3 * 7</answer>", [1, 3, 3, 7], 7).passed  # no float rounding drift
    assert not check(verifier, "<answer>7 / 3</answer>", [7, 3], 2).passed


def test_format_ok_separates_well_formed_misses(verifier):
    assert check(verifier, "<answer>30 + 100 - 93</answer>").details["format_ok"] is True
    assert check(verifier, "<answer>30 + 100</answer>").details["format_ok"] is False


def test_evaluate_expression_is_safe():
    assert evaluate_expression("(1 + 2) * 3") == (9, [1, 2, 3])
    for bad in ["x + 1", "f(1)", "[1, 2]", "1 if 1 else 2", "(" * 400 + "1" + ")" * 400, "1" + "+1" * 400]:
        with pytest.raises(ExpressionError):
            evaluate_expression(bad)


def test_huge_answer_is_rejected_cheaply(verifier):
    verdict = check(verifier, "<answer>" + "1+" * 5000 + "1</answer>")
    assert verdict.details["reason"] == "invalid_expression" and "longer than" in verdict.details["error"]


def test_solver():
    expression = solve([2, 3, 4], 5)
    assert expression is not None
    value, literals = evaluate_expression(expression)
    assert value == 5 and sorted(literals) == [2, 3, 4]
    assert solve([1, 1], 7) is None
    assert solve([3, 3, 8, 8], 24) is not None  # needs a fraction: 8 / (3 - 8 / 3)


def test_registry_and_contract(verifier):
    assert verifiers.get("countdown") is CountdownVerifier
    assert verifier.gold_completion(sample([1, 1], 7)) is None
    verdicts = verifier.verify_batch([(sample(), "<answer>30-100+93</answer>"), (sample(), "<answer>30*100</answer>")])
    assert [v.passed for v in verdicts] == [True, False]
    json.dumps([v.model_dump() for v in verdicts])  # details must be plain JSON for samples.jsonl


def _check_gold_set(verifier, data_file):
    samples = load_samples(data_file)
    golds = [verifier.gold_completion(s) for s in samples]
    unsolvable = [s.id for s, g in zip(samples, golds) if g is None]
    assert not unsolvable, f"{len(unsolvable)} unsolvable rows, e.g. {unsolvable[:5]}"
    verdicts = verifier.verify_batch(list(zip(samples, golds)))
    assert all(v.passed for v in verdicts)
    rotated = verifier.verify_batch([(s, golds[(i + 1) % len(samples)]) for i, s in enumerate(samples)])
    assert sum(v.passed for v in rotated) / len(samples) < 0.05


def test_test_set_is_solvable_and_self_verifies(verifier):
    _check_gold_set(verifier, "countdown_test.jsonl")


@pytest.mark.slow
def test_train_set_is_solvable_and_self_verifies(verifier):
    _check_gold_set(verifier, "countdown_train.jsonl")  # 20000 rows: about 20 s of search


@pytest.mark.parametrize(
    ("completion", "reward"),
    [
        ("<answer>30 - (100 - 93)</answer>", 1.0),  # solved
        ("<answer>30 + 100 - 93</answer>", 0.1),  # well formed, wrong value
        ("<answer>30 + 7</answer>", 0.1),  # wrong numbers: DARE still gives the format term
        ("30 - (100 - 93)", 0.0),  # no answer tag or box
    ],
)
def test_rl_reward_has_dare_format_term(verifier, completion, reward):
    verdict = check(verifier, completion)
    assert verifier.reward(verdict) == reward
    assert verdict.score == (1.0 if reward == 1.0 else 0.0)
