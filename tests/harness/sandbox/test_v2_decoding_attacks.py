"""Attacks on the trusted parent's building, decoding and comparing (classes 4 and 5 of the v2 review).

Class 4: the candidate decides ``status=error`` or crashes the run (undecodable output, ``10**400`` where
floats are expected, non-finite complex values for the judge, lone surrogates in messages and program
text, parser bombs). Class 5: the candidate makes the parent pay (colliding hashes in sets and dict keys,
millions of tiny containers in one record, records over the size limit).

Several programs replace the child's own encoder (found by walking the stack) so that the record they
send, with the job's real channel and nonce, carries exactly the hostile wire data: the parent's decoder
is the only line of defence there. Each such program reports ``NO-PATCH`` when it could not reach the
encoder, and the test checks that the failure came from decoding, so a renamed internal cannot make the
test pass vacuously.

Every attack is graded next to the gold solution of its task in one batch, with 1 and with 2 worker slots,
twice: every attack fails with ``status=scored``, every gold passes, and the rerun gives the same verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dare.harness.data import load_samples
from dare.harness.verifiers.code import CodeVerifier

COLLIDE = "(2 ** 61 - 1)"  # every multiple of the Mersenne prime 2**61 - 1 hashes to 0 in CPython
PATCH = (  # the runner's encoder, found on the stack, replaced by one that answers with the forged wire value
    "import json, sys\n"
    "def _patch(wire):\n"
    "    frame = sys._getframe(1)\n"
    "    while frame is not None:\n"
    "        found = frame.f_globals\n"
    "        if 'encoded_text' in found and 'serve_calls' in found:\n"
    "            found['encoded_text'] = lambda value: json.dumps(wire, separators=(',', ':'))\n"
    "            return True\n"
    "        frame = frame.f_back\n"
    "    return False\n")


def forged(entry: str, params: str, wire_expr: str) -> str:
    """A program whose first result record carries ``wire_expr`` (evaluated in the child) as its output."""
    return ("```python\n" + PATCH + f"WIRE = {wire_expr}\n"
            f"def {entry}({params}):\n    return True if _patch(WIRE) else 'NO-PATCH'\n```\n")


def plain(body: str) -> str:
    return "```python\n" + body + "```\n"


H0 = ("has_close_elements", "numbers, threshold")
# name -> (dataset, task, completion, failure kinds that prove the attack reached its target)
ATTACKS = {
    # ---- class 4: candidate-made errors and crashes
    "big_int_for_bool": ("humaneval", "HumanEval/0",
                         plain("def has_close_elements(numbers, threshold):\n    return 10 ** 400\n"), {"wrong_answer"}),
    "big_int_where_float_expected": ("humaneval", "HumanEval/2",
                                     plain("def truncate_number(number):\n"  # right on the eq site, so the judge sees it
                                           "    return 0.5 if number == 3.5 else 10 ** 400\n"), {"wrong_answer"}),
    "non_finite_complex_to_judge": ("humaneval", "HumanEval/2",
                                    plain("def truncate_number(number):\n"
                                          "    return 0.5 if number == 3.5 else complex(float('inf'), float('nan'))\n"),
                                    {"wrong_answer"}),
    "big_int_surface_area_oracle": ("mbppplus", "Mbpp/581",
                                    plain("def surface_Area(b, s):\n    return 10 ** 400\n"), {"wrong_answer"}),
    "lone_surrogate_in_exception": ("humaneval", "HumanEval/0",
                                    plain("def has_close_elements(numbers, threshold):\n"
                                          "    raise ValueError('\\ud800 bad \\udfff' * 20)\n"), {"runtime_error"}),
    "lone_surrogate_in_output": ("humaneval", "HumanEval/0",
                                 plain("def has_close_elements(numbers, threshold):\n    return '\\udcff' * 50\n"),
                                 {"wrong_answer"}),
    "lone_surrogate_in_program_text": ("humaneval", "HumanEval/0",
                                       "```python\n# \ud800\ndef has_close_elements(numbers, threshold):\n"
                                       "    return True  # \udfff\n```\n", {"syntax_error", "load_error"}),
    "exception_whose_str_raises": ("humaneval", "HumanEval/0", plain(
        "class Bad(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n"
        "def has_close_elements(numbers, threshold):\n    raise Bad()\n"), {"crash", "runtime_error"}),
    "forged_bad_hex": ("humaneval", "HumanEval/0", forged(*H0, "{'b': 'zz'}"), {"bad_output"}),
    "forged_odd_hex": ("humaneval", "HumanEval/0", forged(*H0, "{'b': 'abc'}"), {"bad_output"}),
    "forged_bad_big_int": ("humaneval", "HumanEval/0", forged(*H0, "{'i': '12xyz'}"), {"bad_output"}),
    "forged_bare_big_int": ("humaneval", "HumanEval/0", forged(*H0, "10 ** 30"), {"bad_output"}),
    "forged_object_dtype": ("humaneval", "HumanEval/0", forged(*H0, "{'a': ['|O8', [1], '00' * 8]}"), {"bad_output"}),
    "forged_array_shape_bomb": ("humaneval", "HumanEval/0",
                                forged(*H0, "{'a': ['<i8', [10 ** 9, 10 ** 9], '00' * 8]}"), {"bad_output"}),
    "forged_unknown_tag": ("humaneval", "HumanEval/0", forged(*H0, "{'q': [1]}"), {"bad_output"}),
    "forged_unhashable_key": ("humaneval", "HumanEval/0", forged(*H0, "{'d': [[[1], 2]]}"), {"bad_output"}),
    "forged_too_deep": ("humaneval", "HumanEval/0",
                        forged(*H0, "__import__('functools').reduce(lambda w, _: [w], range(400), [])"), {"bad_output"}),
    "parser_bomb_completion": ("humaneval", "HumanEval/0", "-" * 1_000_000 + "1\n", {"syntax_error", "load_error"}),
    "fence_bomb_completion": ("humaneval", "HumanEval/0", "```" * 300_000, {"syntax_error", "load_error"}),
    # ---- class 5: parent cost
    "colliding_hash_set": ("humaneval", "HumanEval/0",
                           forged(*H0, f"{{'s': [{{'i': format(k * {COLLIDE}, 'x')}} for k in range(1, 100001)]}}"),
                           {"wrong_answer"}),
    "colliding_hash_dict_keys": ("humaneval", "HumanEval/0",
                                 forged(*H0, f"{{'d': [[{{'i': format(k * {COLLIDE}, 'x')}}, k] for k in range(1, 60001)]}}"),
                                 {"wrong_answer"}),
    "colliding_hash_list_for_set_oracle": ("mbppplus", "Mbpp/2", plain(
        f"def similar_elements(test_tup1, test_tup2):\n    return [k * {COLLIDE} for k in range(1, 100001)]\n"),
        {"wrong_answer"}),
    "millions_of_tiny_containers": ("humaneval", "HumanEval/0", forged(*H0, "[[]] * 10_000_000"), {"protocol"}),
    "millions_of_short_strings": ("humaneval", "HumanEval/0", forged(*H0, "['ab'] * 3_000_000"), {"protocol"}),
}


def vm_hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def grade_next_to_gold(attacks: dict, workers: int, cache_dir: Path) -> tuple[dict, float | None]:
    """Grade every attack next to its task's gold in one batch per dataset, twice (plans built first).

    Returns (name -> {"attack": [verdict per run], "gold": [...]}, the largest growth of the parent's peak
    RSS over one graded batch in MiB, or None where the peak cannot be reset)."""
    samples = {f: {s.id: s for s in load_samples(f + ".jsonl")} for f in {d for d, *_ in attacks.values()}}
    graded: dict[str, dict] = {}
    growth: float | None = 0.0
    for dataset in sorted(samples):
        names = [n for n, (d, *_) in attacks.items() if d == dataset]
        verifier = CodeVerifier(dataset, workers=workers, cache_dir=cache_dir, min_time_limit=2.0,
                                sample_time_limit=20, load_time_limit=5)
        try:
            items = []
            for name in names:
                sample = samples[dataset][attacks[name][1]]
                verifier.plan_for(sample)
                items += [(sample, attacks[name][2]), (sample, verifier.gold_completion(sample))]
            runs = []
            for _ in range(2):
                measured = reset_hwm()
                before = vm_hwm_mib()
                runs.append(verifier.verify_batch(items))
                growth = max(growth, vm_hwm_mib() - before) if measured and growth is not None else None
        finally:
            verifier.close()
        for k, name in enumerate(names):
            graded[name] = {"attack": [r[2 * k] for r in runs], "gold": [r[2 * k + 1] for r in runs]}
    return graded, growth


@pytest.fixture(scope="module", params=[1, pytest.param(2, marks=pytest.mark.extended)], ids=["1-slot", "2-slots"])
def graded(request, tmp_path_factory):
    verdicts, growth = grade_next_to_gold(ATTACKS, request.param, tmp_path_factory.mktemp("plans"))
    return {"verdicts": verdicts, "hwm_growth_mib": growth}


def test_suite_covers_classes_4_and_5():
    assert len(ATTACKS) >= 20


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_fails_as_scored_next_to_a_passing_gold(graded, name):
    verdicts = graded["verdicts"][name]
    for verdict in verdicts["attack"]:
        assert verdict.status == "scored", verdict.details
        assert verdict.passed is False, verdict.details
        assert verdict.details.get("failure") in ATTACKS[name][3], verdict.details
        json.dumps(verdict.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")  # writable as UTF-8
    assert "NO-PATCH" not in json.dumps(verdicts["attack"][0].details)
    assert all(v.passed and v.status == "scored" for v in verdicts["gold"]), [v.details for v in verdicts["gold"]]


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_rerun_gives_identical_verdicts(graded, name):
    first, second = graded["verdicts"][name]["attack"]
    assert (first.passed, first.status, first.details.get("failure")) == (
        second.passed, second.status, second.details.get("failure"))


def test_parent_memory_stays_bounded(graded):
    """The whole batch, cap-sized adversarial records included, raises the parent's peak RSS by < 256 MiB."""
    if graded["hwm_growth_mib"] is None:
        pytest.skip("/proc/self/clear_refs is not writable here")
    assert graded["hwm_growth_mib"] < 256, graded["hwm_growth_mib"]
