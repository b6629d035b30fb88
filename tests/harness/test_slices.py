"""A benchmark taken in slices (harness/slices.py, generate_run.py) records what one slice of it all records,
byte for byte: samples.jsonl, metrics and intervals, counts; the engine gets the same batches; a rerun over
a partly filled cache generates only what is missing. And the pieces that keep memory flat: the key index,
the caches read back by position, the replay engine's index, the metrics built sample by sample."""

from __future__ import annotations

import json
import random
from array import array

import pytest

from dare.backends.engines.replay import ReplayEngine
from dare.harness import generate_run, keyindex, slices
from dare.harness.cache import JsonlCache
from dare.harness.cli import main
from dare.harness.data import load_samples
from dare.harness.errors import InputError
from dare.harness.metrics import Accumulator, compute
from dare.harness.records import Verdict
from dare.harness.verifiers import verifiers

from .helpers import write_completions

SERVED = ReplayEngine.generate


def _sudoku_completions(tmp_path, k: int):
    verifier = verifiers.get("sudoku")()
    rows = []
    for i, s in enumerate(load_samples("sudoku_test.jsonl")):
        gold = verifier.gold_completion(s)
        rows += [(s.id, gold if (i + j) % 3 else "<answer>1234</answer>") for j in range(k)]
    return write_completions(tmp_path / f"c{k}.jsonl", rows)


def _run(monkeypatch, capsys, out, completions, slice_requests: int, *extra: str):
    monkeypatch.setattr(slices, "SLICE_REQUESTS", slice_requests)
    monkeypatch.setattr(generate_run, "SLICE_REQUESTS", slice_requests)
    batches: list[int] = []

    def generate(self, requests, decoding):
        batches.append(len(requests))
        return SERVED(self, requests, decoding)

    monkeypatch.setattr(ReplayEngine, "generate", generate)
    assert main(["--no-progress", "--backend", "replay", "--suite", "sudoku", "--completions", str(completions),
                 "--out", str(out), *extra]) == 0
    run_dir = out / capsys.readouterr().out.strip().splitlines()[-1].split("/")[-1]
    record = json.loads((run_dir / "run.json").read_text())
    return (run_dir / "samples.jsonl").read_bytes(), record, batches


def test_slices_record_what_one_slice_records(tmp_path, monkeypatch, capsys):
    completions = _sudoku_completions(tmp_path, 2)
    whole = _run(monkeypatch, capsys, tmp_path / "whole", completions, 10**6, "--set", "batch_size=3")
    sliced = _run(monkeypatch, capsys, tmp_path / "sliced", completions, 5, "--set", "batch_size=3")
    assert sliced[0] == whole[0]
    assert sliced[1]["metrics"] == whole[1]["metrics"] and sliced[1]["counts"] == whole[1]["counts"]
    assert sliced[2] == whole[2] == [3] * 333 + [1]  # the batches of one list of all 1000 requests
    # a rerun over a cache that holds the first 37 samples generates only the rest, and records the same
    _run(monkeypatch, capsys, tmp_path / "resumed", completions, 7, "--set", "batch_size=3", "--limit", "37")
    samples, record, batches = _run(monkeypatch, capsys, tmp_path / "resumed", completions, 7, "--set", "batch_size=3")
    assert samples == whole[0] and record["metrics"] == whole[1]["metrics"]
    assert record["counts"]["sudoku"]["cached"] == 74 and sum(batches) == 1000 - 74


def test_key_map_is_a_dict_of_int_pairs(monkeypatch):
    monkeypatch.setattr(keyindex, "MERGE_AT", 16)
    ours, theirs = keyindex.KeyMap(), {}
    rng = random.Random(0)
    for i in range(3000):
        key = f"k{rng.randrange(1500)}"
        ours.put(key, i, -i)
        theirs[key] = (i, -i)
    assert len(ours) == len(theirs) and all(ours.get(f"k{j}") == theirs.get(f"k{j}") for j in range(1600))
    real = keyindex.digest  # keys whose 64-bit halves coincide are still told apart
    monkeypatch.setattr(keyindex, "digest", lambda k: (7, int(k[1:])) if k.startswith("c") else real(k))
    clash = keyindex.KeyMap()
    for i in range(100):
        clash.put(f"c{i}", i, 0)
    clash.put("c3", 3, 1)
    assert [clash.get(f"c{i}") for i in (0, 3, 99)] == [(0, 0), (3, 1), (99, 0)] and "c100" not in clash
    built = keyindex.KeyMap.build(array("Q", [7] * 4), array("Q", [1, 2, 1, 2]), array("q", [10, 20, 30, 40]),
                                  array("q", [0] * 4))
    assert len(built) == 2 and built.get("c1") == (30, 0) and built.get("c2") == (40, 0)  # the later line wins
    ids = keyindex.SortedKeys.of(["c1", "c5"])
    assert "c5" in ids and "c6" not in ids
    assert ids.contains(array_u64([7, 7, 7]), array_u64([5, 6, 1])).tolist() == [True, False, True]


def array_u64(values):
    import numpy as np

    return np.array(values, dtype=np.uint64)


def test_a_cache_reads_each_record_back_from_its_line(tmp_path):
    path = tmp_path / "v.jsonl"
    cache = JsonlCache(path, Verdict)
    cache.extend([("a", Verdict(score=1.0, passed=True)), ("b", Verdict(score=0.0, passed=False))])
    cache.extend([("a", Verdict(score=0.5, passed=False, answer="é \ud800"))])  # a rerun's line replaces it
    for reader in (cache, JsonlCache(path, Verdict)):
        assert len(reader) == 2 and reader.get("a").score == 0.5 and reader.get("a").answer == "é \ud800"
        assert reader.get("b").passed is False and reader.get("c") is None and "c" not in reader
    with open(path, "a") as f:
        f.write('{"key": "c", "value": {"sc')  # killed mid-write: fenced off by the next append
    JsonlCache(path, Verdict).extend([("d", Verdict(score=1.0, passed=True))])
    assert JsonlCache(path, Verdict).get("d").passed and "c" not in JsonlCache(path, Verdict)


def test_metrics_built_sample_by_sample_are_those_of_the_whole_list():
    rng = random.Random(1)
    per_sample = [[Verdict(score=rng.random(), passed=rng.random() < 0.4,
                           status=rng.choice(["scored"] * 8 + ["error", "unscored"])) for _ in range(4)]
                  for _ in range(300)]
    acc = Accumulator(["accuracy", "pass@k", "partial_credit"], 4)
    for verdicts in per_sample:
        acc.add(verdicts)
    assert acc.result() == compute(["accuracy", "pass@k", "partial_credit"], per_sample, 4)


def test_replay_reads_lines_as_the_whole_text_splits_them(tmp_path):
    from dare.harness.engine import EngineContext

    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "completion": "x"}\n\n{"id": "b", "completion": "y"}\u2028{"id": 3}\n', "utf-8")
    with pytest.raises(InputError, match=r"1 malformed line\(s\): line 4 needs the keys 'id' and 'completion'"):
        ReplayEngine(EngineContext(model_name="m", completions=path))
    path.write_text('{"id": "a", "completion": "x"}\n{"id": "b", "completion": "y"}\r{"id": "a", "completion": "z"}')
    engine = ReplayEngine(EngineContext(model_name="m", completions=path))
    assert engine.decoding_defaults() == {"num_samples": 2}
    assert [engine.completions.text("a", i) for i in (0, 1)] == ["x", "z"] and engine.completions.text("b", 0) == "y"
    with open(path, "a") as f:
        f.write("\n")
    with pytest.raises(InputError, match="changed while this run read it"):
        engine.completions.text("a", 0)


def test_steps_that_run_over_a_whole_benchmark_get_its_missing_requests_in_one_list(tmp_path, monkeypatch, capsys):
    """An engine's own steps with ``streams`` False (OpenCompass's inference runs over a whole benchmark)."""
    from dataclasses import replace

    from dare.harness.registry import engines
    from dare.harness.runner import RunSteps

    calls = []

    class WholeSteps(RunSteps):
        streams = False

        def generate(self, plan, work, todo, store, generations):
            calls.append((len(todo), len(work.requests), sum(1 for _ in work.samples), work.requests[-1].sample_id))
            super().generate(plan, work, todo, store, generations)

    class WholeReplay(ReplayEngine):
        capabilities = replace(ReplayEngine.capabilities, own_steps=True)

        def run_steps(self, plan):
            return WholeSteps()

    saved = engines.snapshot()
    engines.register("whole-replay", WholeReplay)
    try:
        monkeypatch.setattr(slices, "SLICE_REQUESTS", 5)
        completions = _sudoku_completions(tmp_path, 1)
        assert main(["--no-progress", "--backend", "whole-replay", "--suite", "sudoku", "--limit", "23",
                     "--completions", str(completions), "--out", str(tmp_path / "runs")]) == 0
    finally:
        engines.restore(saved)
    assert calls == [(23, 23, 23, "sudoku/test/22")]
    run_dir = tmp_path / "runs" / capsys.readouterr().out.strip().splitlines()[-1].split("/")[-1]
    assert len((run_dir / "samples.jsonl").read_text().splitlines()) == 23
