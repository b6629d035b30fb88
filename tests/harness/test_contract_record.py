"""The recorded contract, part 2: what changes outputs is recorded and keys the caches and the leaderboard.

Real runs of the shipped tiny-sdar (CPU, 2 Sudoku puzzles) and real math-verify grading of replayed
gsm8k completions. On the code before the contract the bf16 run was served from the float32 cache
(``counts.cached == 2``) and ``verifier.fallback=none`` was recorded nowhere and re-used old verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path

from dare.harness import cli
from dare.harness import config as cfg
from dare.harness.data import load_samples
from dare.harness.records import SCHEMA_VERSION, DecodingConfig, RunRecord
from dare.leaderboards.comparability import column_flags
from dare.leaderboards.loading import load_runs
from dare.leaderboards.table import build_tables

FIXTURES = Path(__file__).parent / "fixtures"


def _eval(capsys, *args: str) -> tuple[Path, dict]:
    code = cli.main(["--no-progress", *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    run_dir = Path(out.out.strip().splitlines()[-1])
    return run_dir, json.loads((run_dir / "run.json").read_text())


def test_bfloat16_after_float32_generates_anew_and_records_the_dtype(capsys, tmp_path):
    args = ["--model", "tiny-sdar", "--suite", "sudoku", "--limit", "2", "--out", str(tmp_path),
            "--set", "engine.threads=1"]
    _, fp32 = _eval(capsys, *args)
    _, again = _eval(capsys, *args, "--set", "engine.dtype=float32")  # the default, said out loud: same key
    _, bf16 = _eval(capsys, *args, "--set", "engine.dtype=bfloat16")
    assert fp32["counts"]["sudoku"]["generated"] == 2
    assert again["counts"]["sudoku"]["cached"] == 2 and again["counts"]["sudoku"]["generated"] == 0
    assert bf16["counts"]["sudoku"]["generated"] == 2 and bf16["counts"]["sudoku"]["cached"] == 0
    assert fp32["engine_identity"]["dtype"] == "float32" and bf16["engine_identity"]["dtype"] == "bfloat16"
    assert bf16["backend"]["options"]["dtype"] == "bfloat16" and bf16["engine_identity"]["device"] == "cpu"
    assert bf16["decoder"]["name"] == "block:low_confidence_static"
    assert bf16["decoding"]["config_hash"] == fp32["decoding"]["config_hash"]  # same decoding, other engine
    # the leaderboard sets the two apart: same decoding hash, different engine settings
    runs = [RunRecord.model_validate(r) for r in (fp32, bf16, again)]
    flags = column_flags([(r, r.benchmarks["sudoku"]) for r in runs])
    major = [[f for f in cell if f["severity"] == "major"] for cell in flags]
    assert major[0] == major[2] == [] and [f["kind"] for f in major[1]] == ["engine"]
    assert '"dtype":"bfloat16"' in major[1][0]["text"]
    loaded = load_runs([tmp_path]).runs
    rows = {row.id: sorted(r.record.engine_identity["dtype"] for r in row.runs)
            for table in build_tables(loaded) for row in table.rows}
    assert sorted(rows.values()) == [["bfloat16"], ["float32", "float32"]]  # one row per engine identity


def _gsm8k_completions(path: Path, n: int) -> Path:
    # no \boxed, no ####: only the lenient last-number fallback finds these answers
    samples = load_samples(cfg.benchmark("gsm8k").data)[:n]
    path.write_text("".join(json.dumps({"id": s.id, "completion": f"So the result is {s.reference}."}) + "\n"
                            for s in samples))
    return path


def test_the_strict_verifier_flag_is_recorded_and_rescores(capsys, tmp_path):
    completions = _gsm8k_completions(tmp_path / "gsm8k.jsonl", 3)
    args = ["--backend", "replay", "--suite", "gsm8k", "--completions", str(completions), "--limit", "3",
            "--out", str(tmp_path / "runs")]
    _, lenient = _eval(capsys, *args)
    _, strict = _eval(capsys, *args, "--set", "verifier.fallback=none")
    assert lenient["metrics"]["gsm8k"]["accuracy"]["value"] == 1.0
    assert strict["metrics"]["gsm8k"]["accuracy"]["value"] == 0.0
    assert lenient["benchmarks"]["gsm8k"]["verifier_options"]["fallback"] == "last_number"
    assert strict["benchmarks"]["gsm8k"]["verifier_options"]["fallback"] == "none"
    assert "workers" not in strict["benchmarks"]["gsm8k"]["verifier_options"]  # execution only
    assert strict["counts"]["gsm8k"]["cached"] == 3  # same generations, new verdicts
    # a replay run records only the decoding fields it used (k and batching)
    assert set(strict["decoding"]) == {"num_samples", "batch_size", "config_hash"}
    assert strict["decoder"]["name"] == "replay" and strict["schema_version"] == SCHEMA_VERSION
    loaded = RunRecord.model_validate(strict)
    assert loaded.decoding == DecodingConfig() and loaded.decoding.config_hash() == strict["decoding"]["config_hash"]


def test_a_schema_1_record_still_loads():
    # written by dare-eval before the contract (replay of 3 gsm8k answers; run.json as it was, environment trimmed)
    old = json.loads((FIXTURES / "run_schema1_replay_gsm8k.json").read_text())
    assert old["schema_version"] == 1 and "engine_identity" not in old
    record = RunRecord.model_validate(old)
    assert record.schema_version == SCHEMA_VERSION and record.decoder is None and record.engine_identity == {}
    assert record.benchmarks["gsm8k"].verifier_options == {}
    assert record.decoding.config_hash() == old["decoding"]["config_hash"]
    again = RunRecord.model_validate(record.to_json())  # and the migrated form round-trips
    assert again == record
