"""Golden checks: every reference solution passes its own tests through the sandboxed verifier.

A fast subset runs by default (including the judged, object-input and special-oracle tasks); the full
sets are ``slow``. HumanEval+ and MBPP+ use EvalPlus's own canonical solutions, as EvalPlus does when it
computes expected outputs; the figures are in harness/data/README.md ("Code verifier notes").
"""

from __future__ import annotations

import pytest

from dare.harness.data import load_samples
from dare.harness.verifiers.code import CodeVerifier

# set -> (code dataset, shipped file)
SETS = {"humaneval": ("humaneval", "humaneval.jsonl"), "humanevalplus": ("humanevalplus", "humanevalplus.jsonl"),
        "mbpp": ("mbpp", "mbpp.jsonl"), "mbppplus": ("mbppplus", "mbppplus.jsonl"),
        "mbppplus-v0.1.0": ("mbppplus", "mbppplus_v0.1.0.jsonl")}
FAST = {
    "humaneval": ["HumanEval/0", "HumanEval/2", "HumanEval/32", "HumanEval/33", "HumanEval/38", "HumanEval/53"],
    "mbpp": ["11", "12", "367"],
    "mbppplus": ["Mbpp/2", "Mbpp/3", "Mbpp/124", "Mbpp/737"],
    "mbppplus-v0.1.0": ["Mbpp/115", "Mbpp/164"],
    "humanevalplus": ["HumanEval/2", "HumanEval/14", "HumanEval/32"],
}


def grade(tmp_path, name: str, ids: list[str] | None):
    dataset, data_file = SETS[name]
    samples = load_samples(data_file)
    if ids is not None:
        samples = [s for s in samples if s.id in ids]
        assert len(samples) == len(ids)
    verifier = CodeVerifier(dataset, cache_dir=tmp_path)
    try:
        gold = verifier.verify_batch([(s, verifier.gold_completion(s)) for s in samples])
        # each task's reference, graded against the next task: must fail (the tests are not vacuous)
        rotated = verifier.verify_batch([(s, verifier.gold_completion(samples[(i + 1) % len(samples)]))
                                        for i, s in enumerate(samples)])
        plans = {s.id: verifier.plan_for(s) for s in samples}
    finally:
        verifier.close()
    failed = {s.id: v.details for s, v in zip(samples, gold) if not v.passed}
    assert all(v.status == "scored" for v in gold + rotated)
    base_counts = {s.id: (plans[s.id].base_count, len(s.metadata.get("base_input") or [])) for s in samples}
    return samples, failed, sum(v.passed for v in rotated), base_counts


@pytest.mark.parametrize("name", sorted(FAST))
def test_gold_subset(tmp_path, name):
    _, failed, rotated_passes, base_counts = grade(tmp_path, name, FAST[name])
    assert failed == {}
    assert rotated_passes == 0
    if "plus" in name:  # EvalPlus sets: the plan knows which calls are the base inputs
        assert all(planned == shipped > 0 for planned, shipped in base_counts.values()), base_counts


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SETS))
def test_gold_full(tmp_path, name):
    samples, failed, rotated_passes, _ = grade(tmp_path, name, None)
    assert failed == {}, f"{len(failed)} of {len(samples)} references fail: {sorted(failed)}"
    assert rotated_passes <= len(samples) // 50
