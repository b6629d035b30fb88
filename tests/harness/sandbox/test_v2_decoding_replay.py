"""Through ``dare-eval --backend replay``: candidate output that once crashed the run or decided ``error``
(lone surrogates in exception messages and outputs, 10**400 where floats are expected, non-finite complex
for the judge, an output over the cost bound) gives a complete run: run.json and samples.jsonl
written as UTF-8, every sample ``scored``, only the gold passing; and a rerun grades identically."""

from __future__ import annotations

import json

from dare.harness.data import load_samples

from ..helpers import dare_eval, run_record, write_completions

HOSTILE = [
    "    raise ValueError('\\ud800 lone \\udfff surrogates')\n",
    "    return '\\udcff' * 3\n",
    "    return 0.5 if number == 3.5 else 10 ** 400\n",
    "    return 0.5 if number == 3.5 else complex(float('inf'), float('nan'))\n",
    "    return [[]] * 400_000\n",  # over the output cost bound: refused in the child, quickly
    "    class E(Exception):\n        def __str__(self):\n            return '\\ud800' * 1000\n    raise E()\n",
]


def test_replay_run_survives_hostile_outputs(tmp_path):
    first3 = load_samples("humaneval.jsonl")[:3]
    target = first3[2]
    assert target.id == "HumanEval/2"
    k = len(HOSTILE) + 1
    rows = [(s.id, s.reference) for s in first3[:2] for _ in range(k)]
    rows += [(target.id, body) for body in HOSTILE] + [(target.id, target.reference)]
    path = write_completions(tmp_path / "hostile.jsonl", rows)
    graded = []
    for run in ("a", "b"):
        proc = dare_eval("--backend", "replay", "--suite", "humaneval", "--limit", "3", "--completions", str(path),
                         "--out", str(tmp_path / run), "--set", f"verifier.cache_dir={tmp_path / 'cache'}")
        run_dir, record = run_record(proc)
        text = (run_dir / "samples.jsonl").read_bytes().decode("utf-8")  # strict: valid UTF-8 throughout
        rows_out = [json.loads(line) for line in text.splitlines()]
        assert len(rows_out) == 3 * k and record["metrics"]["humaneval"]
        assert all(r["status"] == "scored" for r in rows_out), [r["details"] for r in rows_out]
        assert all(r["passed"] for r in rows_out if r["id"] != target.id)
        graded.append(sorted((r for r in rows_out if r["id"] == target.id), key=lambda r: r["index"]))
    first, second = graded
    assert [r["passed"] for r in first] == [False] * len(HOSTILE) + [True], [r["details"] for r in first]
    assert [(r["passed"], r["details"].get("failure")) for r in first] == [
        (r["passed"], r["details"].get("failure")) for r in second]
