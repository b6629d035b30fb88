"""The bounded decoder and the hash-free containers, checked against Python's own semantics.

- Canonical keys: two sets (or dicts) of trusted values compare equal as PlainSet/PlainDict exactly when
  Python's ``set`` / ``dict`` say so, with the same size and, for dicts, the same items in the same order.
- Linear decoding: 100k members with one hash decode about as fast as 100k distinct ones (a ratio within
  one run; CPython's own set would need billions of probes).
- Costing: ``record_cost`` bounds a record's decoding cost from above in linear time.
- Bounded memory: records of the worst shapes at the value limit, and a 30 MiB record of tiny containers
  over it, raise the parent's peak RSS by less than 256 MiB.
- No candidate record can raise out of the verdict: every hostile record, through the real ``loads``,
  ``decode`` and :class:`Outcome`, is a failed test with a reason.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from pathlib import Path

import pytest

from dare.harness.sandbox.codec import MAX_RECORD_COST, CodecError, decode, dumps, encode, loads, record_cost
from dare.harness.sandbox.plain import MAX_KEYED_MEMBERS, PlainDict, PlainSet
from dare.harness.sandbox.plans import TestPlan as Plan
from dare.harness.sandbox.verdicts import Outcome

HASHABLE = [0, 1, -1, True, False, 1.0, 0.0, -0.0, 2.5, 1e300, float("inf"), -float("inf"), 2 ** 64, -(2 ** 70),
            2 ** 61 - 1, 2 * (2 ** 61 - 1), complex(1, 0), complex(2.5, 0), complex(0, 1), "", "a", "1", b"", b"a",
            None, (), (1,), (1.0,), (True,), (1, "a"), (1, (2, 3)), (1, (2.0, 3)), frozenset(), frozenset({1, 2}),
            frozenset({2.0, 1}), frozenset({(1, 2)})]


def wire_roundtrip(value):
    return decode(loads(dumps(encode(value))))


@pytest.mark.parametrize("seed", range(40))
def test_plain_sets_follow_python_set_equality(seed):
    rng = random.Random(seed)
    a = rng.sample(HASHABLE, rng.randint(0, 8))
    b = list(a) if seed % 3 == 0 else rng.sample(HASHABLE, rng.randint(0, 8))
    rng.shuffle(b)
    pa, pb = wire_roundtrip(set(a)), wire_roundtrip(frozenset(b))
    assert type(pa) is PlainSet and len(pa) == len(set(a))
    assert (pa == pb) is (set(a) == frozenset(b))


@pytest.mark.parametrize("seed", range(40))
def test_plain_dicts_follow_python_dict_semantics(seed):
    rng = random.Random(seed)
    pairs = [(rng.choice(HASHABLE), rng.randint(0, 3)) for _ in range(rng.randint(0, 10))]
    other = list(pairs) if seed % 2 else [(rng.choice(HASHABLE), rng.randint(0, 3)) for _ in range(len(pairs))]
    built = decode({"d": [[encode(k), encode(v)] for k, v in pairs]})  # duplicates kept on the wire
    python = dict(pairs)
    assert type(built) is PlainDict
    # first key object, last value, in first-insertion order (keys compared through their wire round trip)
    assert [(encode(k), v) for k, v in built.items()] == [(encode(k), v) for k, v in python.items()]
    assert (built == decode({"d": [[encode(k), encode(v)] for k, v in other]})) is (python == dict(other))


def test_nan_equals_nothing_and_negative_zero_equals_zero():
    assert len(wire_roundtrip({float("nan"), float("nan")}.union({1}))) == len({float("nan"), float("nan"), 1})
    assert wire_roundtrip({float("nan")}) != wire_roundtrip({float("nan")})
    assert wire_roundtrip({-0.0}) == wire_roundtrip({0}) == wire_roundtrip({False})


def test_big_ints_and_numpy_values_round_trip_exactly():
    np = pytest.importorskip("numpy")
    big = 18 * 10 ** 99998
    assert wire_roundtrip(big) == big and wire_roundtrip(-big) == -big
    for value in (np.arange(6, dtype=np.int32).reshape(2, 3), np.array(["ab", "c"]), np.float32(1.5), np.bool_(True)):
        back = wire_roundtrip(value)
        assert type(back) is type(value) and back.dtype == value.dtype and np.array_equal(back, value)


HOSTILE_WIRE = [
    {"b": "zz"}, {"b": "abc"}, {"b": 5}, {"i": "12xyz"}, {"i": "0x10"}, {"i": "f" * ((1 << 22) + 1)},
    {"a": ["|O8", [1], "00" * 8]}, {"a": ["<i8", [10 ** 9, 10 ** 9], "00" * 8]}, {"a": ["<i8", [-1], ""]},
    {"a": ["(2,)i8", [1], "00" * 16]}, {"a": ["<f8", "x", ""]}, {"n": ["<f8", "00"]}, {"n": ["|V8", "00" * 8]},
    {"q": [1]}, {"t": 5}, {"t": [1], "s": [2]}, {"d": [[[1], 2]]}, {"d": [[1]]}, {"s": [[1]]}, {"s": [{"s": []}]},
    {"s": [{"x": "Match"}]}, {"c": ["a", 1.0]}, {"c": [{"f": "inf"}]}, {"f": "1e400"}, {"x": 5}, 2 ** 64,
]


@pytest.mark.parametrize("wire", HOSTILE_WIRE, ids=lambda w: json.dumps(w)[:40])
def test_hostile_wire_is_a_codec_error(wire):
    with pytest.raises(CodecError):
        decode(wire)


@pytest.mark.parametrize("text", [
    b'{"i":0,"ok":[' + b"[]," * 500_000 + b"[]]}",             # too costly: half a million containers
    b'{"i":0,"ok":"' + b"\\\"," * 5_000_000 + b'"}',          # quick bound over the limit, precise one fine...
    b'{"i":0,"ok":"\xff"}',                                      # not UTF-8
    b"[" * 100_000 + b"]" * 100_000,                           # deeper than json's own recursion
    b'{"ok":"unterminated',
    b"x" * ((40 << 20) + 1),                                   # over the record size
])
def test_hostile_records_are_refused(text):
    if text.startswith(b'{"i":0,"ok":"\\'):
        assert loads(text)["ok"].startswith('",')  # ... so a long string full of commas and quotes is kept
        return
    with pytest.raises(CodecError):
        loads(text)


def test_bare_ints_beyond_64_bits_are_refused():
    for text in (b'{"ok":1' + b"0" * 30 + b"}", b'{"ok":[1.5,2,-1' + b"0" * 19 + b"]}",
                 b'{"ok":[1' + b"0" * 19 + b"]}"):
        with pytest.raises(CodecError):
            decode(loads(text)["ok"])
    with pytest.raises(CodecError):
        loads(b'{"ok":' + b"7" * 5000 + b"}")  # json's own digit limit, before any quadratic conversion
    assert decode(loads(b'{"ok":[1e300, 2, -9223372036854775808]}')["ok"]) == [1e300, 2, -(2 ** 63)]


def test_strings_full_of_brackets_are_costed_precisely():
    text = json.dumps([",[{" * 10_000, [1, 2], "x"])  # the quick bound charges 30000 characters inside the string
    structure = 2 * 384 + 3 * 40 + 2 * 80 + 40           # outside it: 2 brackets, 3 commas, 2 strings, the first value
    assert record_cost(text, limit=100_000) == record_cost(text.encode(), limit=100_000) == len(text) + structure
    assert record_cost(text, limit=10 ** 9) > 10_000 * 384


def test_mixed_type_set_members_are_limited():
    mixed = {"s": [True] + [encode(k) for k in range(2, MAX_KEYED_MEMBERS + 2)]}
    with pytest.raises(CodecError):
        decode(mixed)
    assert len(decode({"s": [encode(k) for k in range(2, MAX_KEYED_MEMBERS + 2)]})) == MAX_KEYED_MEMBERS  # one type


def test_colliding_hashes_decode_in_linear_time():
    """100k members with one CPython hash cost about what 100k distinct ones cost (ratio in one run)."""
    prime = 2 ** 61 - 1
    colliding = dumps({"s": [encode(k * prime) for k in range(1, 100_001)]})
    distinct = dumps({"s": [encode(k * prime + k) for k in range(1, 100_001)]})

    def best_of_3(text):
        times = []
        for _ in range(3):
            start = time.perf_counter()
            value = decode(loads(text))
            times.append(time.perf_counter() - start)
        assert len(value) == 100_000
        return min(times)

    assert best_of_3(colliding) < 4 * best_of_3(distinct)


def _hwm_mib() -> float:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def at_limit(unit: bytes, over: bool = False) -> bytes:
    """``[unit, unit, ...]`` as long as the cost limit allows (or twice that)."""
    n = (MAX_RECORD_COST - 4096) // record_cost(unit + b",", limit=10 ** 12) * (2 if over else 1)
    return b"[" + (unit + b",") * (n - 1) + unit + b"]"


WORST_SHAPES = {  # each as large as the cost limit allows: the most parent memory per byte for its kind
    "empty_lists": at_limit(b"[]"),
    "tuples": at_limit(b'{"t":[]}'),
    "sets": at_limit(b'{"s":[]}'),
    "dicts": at_limit(b'{"d":[[1,2]]}'),
    "nested_tuples": at_limit(b'{"t":[{"t":[1]}]}'),
    "short_strings": at_limit(b'"ab"'),
    "floats": at_limit(b"1.5"),
    "mixed_set_members": b'{"s":[true,' + b",".join(b"%d" % k for k in range(2, MAX_KEYED_MEMBERS)) + b"]}",
    "int_set": b'{"s":' + at_limit(b"123456") + b"}",
    "tiny_containers_over_the_limit": at_limit(b"[]", over=True),
    "tiny_containers_cap_sized": b"[" + b"[]," * 10_000_000 + b"[]]",  # the child's 32 MiB output cap
}


@pytest.mark.parametrize("shape", sorted(WORST_SHAPES))
def test_parent_memory_per_record_is_bounded(shape):
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pytest.skip("/proc/self/clear_refs is not writable here")
    record = b'{"i":0,"ok":' + WORST_SHAPES[shape] + b"}"
    before = _hwm_mib()
    try:
        value = decode(loads(record)["ok"])
    except CodecError:
        value = None
    growth = _hwm_mib() - before
    assert (value is None) is ("over_the_limit" in shape or "cap_sized" in shape)
    assert growth < 256, f"{shape}: +{growth:.0f} MiB"


# ---------------------------------------------------------------- no candidate record can make an error

def _plans() -> list[Plan]:
    call = encode([[1.5, [1, 2]], {}])
    plans = [Plan("f", [call], [encode(expected)], [oracle], [None])
             for oracle, expected in (("eq", 0.5), ("truthy", None), ("falsy", None), ("evalplus:humaneval", [0.5]))]
    for entry in ("are_equivalent", "sum_div", "surface_Area", "digit_distance_nums", "similar_elements", "check_str"):
        plans.append(Plan(entry, [encode([[3, 4], {}])], [encode(7.5)], ["evalplus:mbpp"], [None], 1e-3))
    return plans


def _hostile_records():
    values = HOSTILE_WIRE + [encode(v) for v in (10 ** 400, -(10 ** 400), complex(math.inf, math.nan), "\udcff",
                                                  [10 ** 400], (1, [2]), {1: [2]}, {(1, 2)}, b"\x00" * 10)]
    values += [{"a": ["<f8", [2], "00" * 16]}, {"a": ["<U2", [2], "61000000" * 2]}, {"n": ["|b1", "01"]},
               {"n": ["<M8[s]", "00" * 8]}, {"a": ["<c16", [1], "00" * 16]}, {"x": "Always"}]
    for value in values:
        yield {"i": 0, "ok": value, "t": 0.0}
    yield from ({"i": 0, "err": "\ud800" * 100, "msg": ["\udfff"] * 1000}, {"i": 0, "err": {"d": []}},
                {"i": 0}, {"i": "0", "ok": 1}, {"i": 5, "ok": 1}, {"i": True, "ok": 1}, {"done": 99},
                {"i": 0, "timeout": 1})
    rng = random.Random(7)
    for _ in range(1500):  # random trees of tags and bodies: mostly invalid, all valid JSON
        yield {"i": 0, "ok": _random_wire(rng, 0), "t": 0.0}
    pieces = ['{"i":0,"ok":', "[", "]", "{", "}", '"t"', '"s"', '"d"', '"i"', '"a"', '"n"', '"b"', ":", ",", "1",
              "1e999", "-0", '"zz"', "null", "true", '"\\ud800"', "18446744073709551616", '"<f8"']
    for _ in range(1500):
        yield "".join(rng.choice(pieces) for _ in range(rng.randint(1, 14))).encode()


def _random_wire(rng: random.Random, depth: int):
    scalars = [None, True, 0, -1, 2 ** 63 - 1, 1.5, -0.0, "", "zz", "abc", "ff", "\ud800", "<f8", "|b1", "inf", "nan"]
    roll = rng.random()
    if depth > 3 or roll < 0.35:
        return rng.choice(scalars)
    if roll < 0.55:
        return [_random_wire(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice("tdszfcbiaxnq"): _random_wire(rng, depth + 1)}


def test_no_candidate_record_raises_out_of_the_verdict():
    """Records go through the real loads (bytes), decode and Outcome.accept for every kind of oracle."""
    plans = _plans()
    failed = 0
    for record, plan in itertools.product(_hostile_records(), plans):
        outcome = Outcome(plan)
        outcome.accept({"ready": True})
        try:
            parsed = loads(record) if isinstance(record, bytes) else loads(dumps(record) if _dumpable(record)
                                                                            else json.dumps(record))
        except CodecError:
            continue  # the pool reports this as the job's protocol failure
        if type(parsed) is not dict:
            continue
        keep_going = outcome.accept(parsed)
        if outcome.failure is not None:
            failed += 1
            assert keep_going is False
            json.dumps(outcome.details(), ensure_ascii=False).encode("utf-8")  # writable
    assert failed > 1500


def _dumpable(record) -> bool:
    try:
        dumps(record)
        return True
    except (ValueError, TypeError):
        return False


def test_to_python_restores_trusted_values():
    from dare.harness.sandbox.plain import to_python

    value = {"k": [{1, 2}, frozenset({(1, 2.5)})], (1, 2): {3: None}}
    back = to_python(wire_roundtrip(value))
    assert back == value and type(back["k"][0]) is set and type(back["k"][1]) is frozenset


def test_child_output_bound_matches_the_parent():
    """An output the child accepts is never refused by the parent's cost bound (the same formula, 1 MiB less)."""
    from dare.harness.sandbox import child_runner, codec

    assert (child_runner.CONTAINER_COST, child_runner.STRING_COST, child_runner.VALUE_COST) == (
        codec.CONTAINER_COST, codec.STRING_COST, codec.VALUE_COST)
    assert child_runner.COST_CAP == codec.MAX_RECORD_COST - (1 << 20)
    for text in ('[' + '"ab",' * 1000 + '1]', json.dumps({"t": [[1.5] * 100] * 100}), '{"d":[[1,2]]}'):
        assert child_runner.output_cost(text) == record_cost(text, limit=10 ** 12)
