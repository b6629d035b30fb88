"""A returned value is what it holds, not what its methods say.

For each builtin type a candidate can subclass, two programs return an instance whose overridden methods
(iteration, length, item access, ``items``/``keys``/``values``, ``__index__``, ``__float__``, ``__str__``,
``__repr__``, ``__bytes__``, ``real``...) present one value while its builtin storage holds another:
- *forged*: the storage holds a wrong answer, the methods show the right one; EvalPlus's ``==`` reads the
  storage and fails it, and so must DARE (the child used to encode a subclass through those methods);
- *honest*: the storage holds the right answer, the methods show a wrong one; both pass.
Each verdict is checked against EvalPlus 0.3.1's own, run alone on the same program. Where EvalPlus compares
through an overridden ``__eq__`` the verdicts differ by design, and the tests name the class: DARE judges the
value, so an ``__eq__`` that says True does not pass a wrong value (EvalPlus is fooled) and one that says False
does not fail a right value (EvalPlus calls it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .verdict_pairs import dare_verdict, evalplus_verdict, verifier_fixture

LIMIT = 1.0
# type -> (its methods that present SHOWN, the right value, a wrong value)
LIARS = {
    "list": ("    def __iter__(self): return iter(SHOWN)\n    def __len__(self): return len(SHOWN)\n"
             "    def __getitem__(self, i): return SHOWN[i]\n    def __reversed__(self): return reversed(SHOWN)\n",
             [0, 1, 2], [9, 9, 9]),
    "tuple": ("    def __iter__(self): return iter(SHOWN)\n    def __len__(self): return len(SHOWN)\n"
              "    def __getitem__(self, i): return SHOWN[i]\n", (0, 1, 2), (9, 9, 9)),
    "dict": ("    def items(self): return SHOWN.items()\n    def keys(self): return SHOWN.keys()\n"
             "    def values(self): return SHOWN.values()\n    def __iter__(self): return iter(SHOWN)\n"
             "    def __getitem__(self, k): return SHOWN[k]\n    def __len__(self): return len(SHOWN)\n",
             {"a": 1, "b": 2}, {"a": 9, "c": 2}),
    "set": ("    def __iter__(self): return iter(SHOWN)\n    def __len__(self): return len(SHOWN)\n"
            "    def __contains__(self, v): return v in SHOWN\n", {1, 2}, {8, 9}),
    "frozenset": ("    def __iter__(self): return iter(SHOWN)\n    def __len__(self): return len(SHOWN)\n"
                  "    def __contains__(self, v): return v in SHOWN\n", frozenset({1, 2}), frozenset({8, 9})),
    "str": ("    def __str__(self): return SHOWN\n    def __iter__(self): return iter(SHOWN)\n"
            "    def __getitem__(self, i): return SHOWN[i]\n    def __len__(self): return len(SHOWN)\n"
            "    def encode(self, *a): return SHOWN.encode(*a)\n", "right", "wrong"),
    "bytes": ("    def __bytes__(self): return SHOWN\n    def hex(self, *a): return SHOWN.hex(*a)\n"
              "    def __iter__(self): return iter(SHOWN)\n    def __getitem__(self, i): return SHOWN[i]\n",
              b"right", b"wrong"),
    "int": ("    def __index__(self): return SHOWN\n    def __int__(self): return SHOWN\n"
            "    def __float__(self): return float(SHOWN)\n    def __str__(self): return str(SHOWN)\n"
            "    def __format__(self, spec): return format(SHOWN, spec)\n", 7, 9),
    "float": ("    def __float__(self): return SHOWN\n    def __int__(self): return int(SHOWN)\n"
              "    def __str__(self): return str(SHOWN)\n    def __format__(self, spec): return format(SHOWN, spec)\n",
              0.5, 9.5),
    "complex": ("    real = property(lambda self: SHOWN.real)\n    imag = property(lambda self: SHOWN.imag)\n"
                "    def __complex__(self): return SHOWN\n", 1 + 2j, 9 + 9j),
}


def program(base: str, shown, stored) -> str:
    methods = LIARS[base][0]
    return (f"SHOWN = {shown!r}\nclass Value({base}):\n{methods}    def __repr__(self): return repr(SHOWN)\n"
            f"def f(k):\n    return Value({stored!r})\n")


code_verifier = verifier_fixture(LIMIT)


@pytest.mark.parametrize("base", sorted(LIARS))
def test_a_subclass_is_judged_by_what_it_holds(code_verifier, base):
    _, right, wrong = LIARS[base]
    forged, honest = program(base, right, wrong), program(base, wrong, right)
    verdicts = {
        kind: (dare_verdict(code_verifier, source, [[3]], [right]), evalplus_verdict(source, [[3]], [right], LIMIT))
        for kind, source in (("forged", forged), ("honest", honest))}
    assert verdicts == {"forged": ((False, "wrong_answer"), "fail"), "honest": ((True, None), "pass")}


def test_a_nested_subclass_is_read_from_its_storage_too(code_verifier):
    """A list of an int subclass whose ``__index__`` lies, inside a tuple subclass whose iteration lies."""
    source = ("class Lying(int):\n    def __index__(self): return 1\n    def __int__(self): return 1\n"
              "class Row(tuple):\n    def __iter__(self): return iter((1, [1, 1]))\n"
              "def f(k):\n    return Row((0, [Lying(0), Lying(0)]))\n")
    assert dare_verdict(code_verifier, source, [[3]], [(1, [1, 1])]) == (False, "wrong_answer")
    assert evalplus_verdict(source, [[3]], [(1, [1, 1])], LIMIT) == "fail"
    assert dare_verdict(code_verifier, source, [[3]], [(0, [0, 0])]) == (True, None)
    assert evalplus_verdict(source, [[3]], [(0, [0, 0])], LIMIT) == "pass"


def test_where_evalplus_calls_an_overridden_eq_dare_judges_the_value(code_verifier):
    """The two named differences: ``__eq__`` saying True fools EvalPlus (DARE is stricter); ``__eq__`` saying
    False fails a right value in EvalPlus (DARE reads the value)."""
    says_true = "class Value(list):\n    def __eq__(self, other): return True\ndef f(k):\n    return Value([9])\n"
    says_false = "class Value(list):\n    def __eq__(self, other): return False\ndef f(k):\n    return Value([0])\n"
    assert (dare_verdict(code_verifier, says_true, [[3]], [[0]]), evalplus_verdict(says_true, [[3]], [[0]], LIMIT)) \
        == ((False, "wrong_answer"), "pass")
    assert (dare_verdict(code_verifier, says_false, [[3]], [[0]]), evalplus_verdict(says_false, [[3]], [[0]], LIMIT)) \
        == ((True, None), "fail")


def test_a_value_of_no_builtin_type_is_an_unsupported_result(code_verifier):
    source = "class Anything:\n    def __eq__(self, other): return True\ndef f(k):\n    return Anything()\n"
    assert dare_verdict(code_verifier, source, [[3]], [7]) == (False, "unsupported_result_type")
    assert evalplus_verdict(source, [[3]], [7], LIMIT) == "pass"  # fooled by __eq__: DARE is stricter


@pytest.mark.parametrize("returned, expected, verdicts", [
    ("np.str_('abc\\x00\\x00')", "abc", ((False, "wrong_answer"), "fail")),
    ("np.bytes_(b'abc\\x00')", b"abc", ((False, "wrong_answer"), "fail")),
    ("np.str_('abc')", "abc", ((True, None), "pass")),
])
def test_a_numpy_string_keeps_its_trailing_nuls(code_verifier, returned, expected, verdicts):
    """np.str_ and np.bytes_ are str and bytes holding every character; numpy's fixed-width buffer of them
    drops trailing NULs, so reading one through it passed 'abc\\0\\0' for 'abc' (HumanEval/28)."""
    source = f"import numpy as np\ndef f(k):\n    return {returned}\n"
    assert (dare_verdict(code_verifier, source, [[3]], [expected]),
            evalplus_verdict(source, [[3]], [expected], LIMIT)) == verdicts


ROLLING_MAX = ("from typing import List\n\ndef rolling_max(numbers: List[int]) -> List[int]:\n"
               "    class Shown(list):\n        def __iter__(self):\n            best, out = None, []\n"
               "            for n in numbers:\n                best = n if best is None else max(best, n)\n"
               "                out.append(best)\n            return iter(out)\n"
               "    return Shown([0] * len(numbers))\n")


@pytest.mark.parametrize("suite", ["humaneval", "humanevalplus"])
def test_rolling_max_whose_iteration_lies_fails_as_in_evalplus(tmp_path, capsys, suite):
    """HumanEval/9 as reported: a list subclass holding zeros whose ``__iter__`` yields the running maxima
    passed 4/4 (HumanEval) and 963/963 (HumanEval+); EvalPlus's == reads the zeros."""
    from dare.harness import cli

    completions = tmp_path / "rolling_max.jsonl"
    others = [{"id": f"HumanEval/{k}", "completion": "    pass\n"} for k in range(9)]  # the first ten samples
    completions.write_text("".join(json.dumps(row) + "\n" for row in [
        *others, {"id": "HumanEval/9", "completion": ROLLING_MAX}]))
    args = ["--no-progress", "--backend", "replay", "--suite", suite, "--completions", str(completions),
            "--out", str(tmp_path / "runs"), "--limit", "10"]
    assert cli.main(args) == 0
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    row = next(json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()
               if json.loads(line)["id"] == "HumanEval/9")
    assert row["passed"] is False and row["details"]["failure"] == "wrong_answer"
    assert row["details"]["first_failure"]["output"] == "[0, 0, 0, 0]"  # what it holds (the empty input passes)
