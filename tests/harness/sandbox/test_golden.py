"""Golden checks: every reference solution passes its own tests through the sandboxed verifier.

A fast subset runs by default (including the judged, object-input and special-oracle tasks); the full
sets are ``slow``. HumanEval+ ships no reference solutions: the original HumanEval ones are used and
the known exceptions (EvalPlus changed the task or the reference is too slow for the plus inputs) are
listed in harness/data/README.md and here.
"""

from __future__ import annotations

import pytest

from dare.harness.data import load_samples
from dare.harness.verifiers.code import CodeVerifier

FILES = {"humaneval": "humaneval.jsonl", "humanevalplus": "humanevalplus.jsonl", "mbpp": "mbpp.jsonl",
         "mbppplus": "mbppplus.jsonl"}
FAST = {
    "humaneval": ["HumanEval/0", "HumanEval/2", "HumanEval/32", "HumanEval/33", "HumanEval/38", "HumanEval/53"],
    "mbpp": ["11", "12", "367"],
    "mbppplus": ["Mbpp/2", "Mbpp/3", "Mbpp/737"],
    "humanevalplus": ["HumanEval/0", "HumanEval/2", "HumanEval/14"],
}
# HumanEval+ rows whose *original* HumanEval reference fails the EvalPlus tests (see the data README).
HUMANEVALPLUS_EXCEPTIONS = {
    "HumanEval/22", "HumanEval/39", "HumanEval/44", "HumanEval/49", "HumanEval/55", "HumanEval/63", "HumanEval/64",
    "HumanEval/76", "HumanEval/91", "HumanEval/95", "HumanEval/97", "HumanEval/111", "HumanEval/122",
    "HumanEval/123", "HumanEval/124", "HumanEval/125", "HumanEval/127", "HumanEval/132", "HumanEval/140",
    "HumanEval/150",
}
# prime_fib's naive reference needs about the 20 s reference limit for n = 12: it passes on an idle machine
# and times out on a loaded one, so it may land on either side.
TIMING_DEPENDENT = {"HumanEval/39"}


def grade(tmp_path, dataset: str, ids: list[str] | None):
    samples = load_samples(FILES[dataset])
    if ids is not None:
        samples = [s for s in samples if s.id in ids]
        assert len(samples) == len(ids)
    verifier = CodeVerifier(dataset, cache_dir=tmp_path)
    try:
        gold = verifier.verify_batch([(s, verifier.gold_completion(s)) for s in samples])
        # each task's reference, graded against the next task: must fail (the tests are not vacuous)
        rotated = verifier.verify_batch([(s, verifier.gold_completion(samples[(i + 1) % len(samples)]))
                                        for i, s in enumerate(samples)])
    finally:
        verifier.close()
    failed = {s.id: v.details for s, v in zip(samples, gold) if not v.passed}
    assert all(v.status == "scored" for v in gold + rotated)
    return samples, failed, sum(v.passed for v in rotated)


@pytest.mark.parametrize("dataset", sorted(FAST))
def test_gold_subset(tmp_path, dataset):
    _, failed, rotated_passes = grade(tmp_path, dataset, FAST[dataset])
    assert failed == {}
    assert rotated_passes == 0


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["humaneval", "mbpp", "mbppplus"])
def test_gold_full(tmp_path, dataset):
    samples, failed, rotated_passes = grade(tmp_path, dataset, None)
    assert failed == {}, f"{len(failed)} of {len(samples)} references fail"
    assert rotated_passes <= len(samples) // 50


@pytest.mark.slow
def test_gold_full_humanevalplus(tmp_path):
    samples, failed, _ = grade(tmp_path, "humanevalplus", None)
    assert HUMANEVALPLUS_EXCEPTIONS - TIMING_DEPENDENT <= set(failed) <= HUMANEVALPLUS_EXCEPTIONS
    assert len(samples) == 163
