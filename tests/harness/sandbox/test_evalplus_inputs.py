"""The arguments the sandboxed child calls a function with are EvalPlus's own, types included at every depth.

For every MBPP+ task of both shipped versions and every input (base and plus), DARE's reconstruction
(``evalplus_inputs.mbpp_arguments``), sent over the wire as a plan sends it (``codec.encode``, JSON, the
child's ``dec``), must equal what evalplus 0.3.1's ``mbpp_deserialize_inputs`` gives, with the same type
at every depth (a tuple is not a list, a set not a dict, 0.0 not 0). HumanEval+ inputs reach the child as
the JSON values EvalPlus passes. The argument sequence itself is compared as a list: EvalPlus returns it
as a tuple for a few tasks, and always splats it (``fn(*inp)``).
"""

from __future__ import annotations

import json
import math

import pytest

from dare.harness.data import load_samples
from dare.harness.errors import DataError
from dare.harness.sandbox import child_runner
from dare.harness.sandbox.codec import encode
from dare.harness.sandbox.datasets import base_and_plus_inputs
from dare.harness.sandbox.evalplus_inputs import MBPP_RULES, mbpp_arguments

evalplus_mbpp = pytest.importorskip("evalplus.data.mbpp")

MBPPPLUS_FILES = ["mbppplus.jsonl", "mbppplus_v0.1.0.jsonl"]  # v0.2.0 (the default) and v0.1.0


def typed_equal(a, b) -> bool:
    """Deep equality that also requires ``type(a) is type(b)`` at every depth; NaN equals NaN, and a zero's sign
    counts (``cmath.phase`` of a complex depends on it, as in Mbpp/124 and 252)."""
    if type(a) is not type(b):
        return False
    kind = type(a)
    if kind is float:
        return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (math.isnan(a) and math.isnan(b))
    if kind is complex:
        return typed_equal(a.real, b.real) and typed_equal(a.imag, b.imag)
    if kind in (list, tuple):
        return len(a) == len(b) and all(map(typed_equal, a, b))
    if kind is dict:  # same pairs in the same order: the codec keeps insertion order
        return len(a) == len(b) and all(map(typed_equal, a.items(), b.items()))
    if kind in (set, frozenset):
        return len(a) == len(b) and all(any(typed_equal(x, y) for y in b) for x in a)
    return a == b


def child_sees(args: list) -> list:
    """The positional arguments the child decodes from a plan's wire call (datasets._wire_calls)."""
    wire = json.loads(json.dumps(encode([list(args), {}]), separators=(",", ":"), allow_nan=False))
    positional, keywords = child_runner.dec(wire)
    assert keywords == {}
    return positional


@pytest.mark.parametrize("a, b", [((1,), [1]), ([0], [0.0]), ([{}], [set()]), ({1: (2,)}, {1: [2]}),
                                  (complex(1, 0), 1.0), ((1, [2]), (1, (2,))), (frozenset({1}), {1}), (True, 1),
                                  (0.0, -0.0), (complex(-1, 0.0), complex(-1, -0.0))])
def test_typed_equal_tells_types_apart(a, b):
    assert not typed_equal(a, b)
    assert typed_equal(a, a) and typed_equal([float("nan")], [float("nan")])


@pytest.mark.parametrize("name", MBPPPLUS_FILES)
def test_every_mbppplus_input_reaches_the_child_as_evalplus_builds_it(name):
    samples = load_samples(name)
    wrong = {}
    for sample in samples:
        base, plus = base_and_plus_inputs(sample.metadata)
        expected = [list(a) for part in (base, plus) for a in evalplus_mbpp.mbpp_deserialize_inputs(sample.id, part)]
        got = [child_sees(mbpp_arguments(sample.id, a)) for a in base + plus]
        assert len(got) == len(expected)
        bad = [k for k, (g, e) in enumerate(zip(got, expected)) if not typed_equal(g, e)]
        if bad:
            wrong[sample.id] = f"{len(bad)} of {len(got)} inputs, first {bad[0]}: {got[bad[0]]!r:.120}"
    assert wrong == {}
    assert {int(s.id.split("/")[1]) for s in samples} & set(MBPP_RULES)  # the table is exercised


def test_every_humanevalplus_input_reaches_the_child_as_its_json_value():
    samples = load_samples("humanevalplus.jsonl")
    assert len(samples) == 164
    for sample in samples:
        base, plus = base_and_plus_inputs(sample.metadata)
        for k, args in enumerate(base + plus):
            assert typed_equal(child_sees(args), list(args)), (sample.id, k)


def test_a_row_that_does_not_fit_its_rule_is_a_data_error():
    with pytest.raises(DataError, match="Mbpp/124"):
        mbpp_arguments("Mbpp/124", ["0"])
    with pytest.raises(DataError, match="Mbpp/2"):
        mbpp_arguments("Mbpp/2", [1, 2])
    assert mbpp_arguments("Mbpp/3", [7]) == [7]  # no rule: the JSON arguments as they are
