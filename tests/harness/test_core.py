"""Records, registry, metrics, prompts and the cache: the contracts everything else relies on."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from dare.harness.cache import JsonlCache
from dare.harness.data import load_samples
from dare.harness.errors import DataError, RegistryError
from dare.harness.metrics import bootstrap_ci, compute, pass_at_k
from dare.harness.prompts import template
from dare.harness.records import DecodingConfig, Generation, RunRecord, Verdict
from dare.harness.registry import Registry


def test_config_hash_is_stable_and_ignores_batch_size():
    a = DecodingConfig(gen_length=256, steps=128, block_length=32)
    assert a.config_hash() == DecodingConfig(gen_length=256, steps=128, block_length=32, batch_size=8).config_hash()
    assert a.config_hash() != DecodingConfig(gen_length=256, steps=64, block_length=32).config_hash()
    assert DecodingConfig.model_validate(a.to_record()) == a


def test_decoding_record_rejects_a_tampered_hash():
    record = DecodingConfig().to_record()
    record["steps"] = 7
    with pytest.raises(ValidationError, match="config_hash"):
        DecodingConfig.model_validate(record)


def test_records_are_frozen_and_strict():
    with pytest.raises(ValidationError):
        Verdict(score=1.0, bogus=True)
    v = Verdict(score=1.0, passed=True)
    with pytest.raises(ValidationError):
        v.score = 0.0  # type: ignore[misc]


def test_run_record_refuses_newer_schema():
    with pytest.raises(ValidationError, match="newer"):
        RunRecord.model_validate({"schema_version": 999})


def test_registry_collisions_lazy_entries_and_suggestions():
    reg: Registry = Registry("widget")
    reg.register("json_dumps", "json:dumps")
    assert reg.get("json_dumps") is json.dumps
    reg.register("json_dumps", json.dumps)  # the same object again is fine
    with pytest.raises(RegistryError, match="already registered"):
        reg.register("json_dumps", json.loads)
    with pytest.raises(RegistryError, match="did you mean 'json_dumps'"):
        reg.get("json_dump")
    reg.register("broken", "no_such_module_xyz:thing")
    with pytest.raises(RegistryError, match="could not be imported"):
        reg.get("broken")


def test_pass_at_k_matches_the_closed_form():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_metrics_exclude_infrastructure_errors_and_give_intervals():
    ok, bad, err = Verdict(score=1, passed=True), Verdict(score=0), Verdict(status="error")
    values, counts = compute(["accuracy"], [[ok], [bad], [ok], [err]], k=1)
    assert counts == {"scored": 3, "error": 1, "unscored": 0}
    acc = values["accuracy"]
    assert acc.n == 3 and acc.value == pytest.approx(2 / 3)
    assert acc.ci[0] <= acc.value <= acc.ci[1]
    assert bootstrap_ci([1.0] * 10) == (1.0, 1.0)
    assert bootstrap_ci([0.0, 1.0] * 50) == bootstrap_ci([0.0, 1.0] * 50)  # seeded: reproducible


def test_bootstrap_in_chunks_draws_what_one_matrix_draws(monkeypatch):
    """Memory flat in n (a few resamples at a time), intervals unchanged: records keep their CIs."""
    import numpy as np

    from dare.harness import metrics

    values = np.random.default_rng(1).random(777)
    monkeypatch.setattr(metrics, "BOOTSTRAP_CHUNK_VALUES", 10**9)  # one (1000, n) matrix, as before
    whole = bootstrap_ci(values)
    monkeypatch.setattr(metrics, "BOOTSTRAP_CHUNK_VALUES", 3 * 777 + 5)  # 3 resamples a chunk, 1 in the last
    assert bootstrap_ci(values) == whole


def test_pass_at_k_metric_family_from_k_generations():
    group = [Verdict(passed=True, score=1), Verdict(), Verdict(), Verdict()]
    values, _ = compute(["pass@k"], [group], k=4)
    assert set(values) == {"pass@1", "pass@2", "pass@4"}
    assert values["pass@1"].value == pytest.approx(0.25) and values["pass@4"].value == 1.0


def test_dare_prompts_reproduce_the_documented_text():
    countdown = load_samples("countdown_test.jsonl")[0]
    text = template("dare_countdown").render(countdown)[0].content
    assert text.startswith("Respond in the following format:\n<reasoning>\n...\n</reasoning>")
    assert f"{countdown.prompt} You must use all numbers from the list" in text
    assert text.endswith("<answer>\n2*4-3\n</answer>")
    sudoku = load_samples("sudoku_test.jsonl")[0]
    assert template("dare_sudoku").render(sudoku)[0].content.endswith(
        f"</answer>\n\n\nSolve the following Sudoku puzzle: {sudoku.metadata['puzzle']}\n")
    mbpp = template("dare_mbpp").render(load_samples("mbpp.jsonl")[0])
    assert [m.role for m in mbpp] == ["user", "assistant"] * 4
    assert mbpp[-1].content == "[BEGIN]\n" and "assert remove_Occ" in mbpp[-2].content
    d1 = template("d1_math500").render(load_samples("math500.jsonl")[0])[0].content
    assert "\\boxed{...}" in d1  # LaTeX braces are not placeholders


def test_tampered_data_is_refused(tmp_path, monkeypatch):
    from dare.harness import data

    (tmp_path / "MANIFEST.sha256").write_text("0" * 64 + "  x.jsonl\n")
    (tmp_path / "x.jsonl").write_text('{"id": 1, "prompt": "p", "answer": "a"}\n')
    monkeypatch.setattr(data, "DATA_DIR", tmp_path)
    data.manifest.cache_clear()
    data.verified_path.cache_clear()
    try:
        with pytest.raises(DataError, match="modified"):
            data.verified_path("x.jsonl")
    finally:
        data.manifest.cache_clear()
        data.verified_path.cache_clear()


def test_cache_survives_a_torn_line(tmp_path):
    path = tmp_path / "g.jsonl"
    cache = JsonlCache(path, Generation)
    cache.extend([("a", Generation(sample_id="s", text="one"))])
    with open(path, "a") as f:
        f.write('{"key": "b", "value": {"sample_')  # killed mid-write
    cache = JsonlCache(path, Generation)
    assert "a" in cache and "b" not in cache
    cache.extend([("c", Generation(sample_id="s", text="three"))])
    assert {"a", "c"} <= set(k for k in ("a", "b", "c") if k in JsonlCache(path, Generation))


@pytest.mark.extended
def test_a_lone_surrogate_in_replayed_text_is_written_and_read_back(tmp_path):
    """json.loads turns "\\ud800" into a lone surrogate, which UTF-8 cannot encode: the caches, samples.jsonl
    and run.json must still be written (escaped), read back to the same text, and a rerun must reuse them."""
    from dare.harness.records import json_text, sha256_text
    from tests.harness.helpers import dare_eval, run_record, write_completions

    text = "The answer is \ud800 #### 18"
    assert json.loads(json_text({"c": text})) == {"c": text} and "é" in json_text({"c": "é"})  # readable otherwise
    assert sha256_text("é") == hashlib.sha256("é".encode()).hexdigest() and len(sha256_text(text)) == 64
    completions = write_completions(tmp_path / "c.jsonl", [("gsm8k/test/0", text)])
    args = ("--backend", "replay", "--suite", "gsm8k", "--limit", "1", "--completions", str(completions),
            "--out", str(tmp_path / "runs"))
    run_dir, record = run_record(dare_eval(*args))
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_bytes().decode("utf-8").splitlines()]
    assert rows[0]["completion"] == text and rows[0]["status"] == "scored"
    _, again = run_record(dare_eval(*args))
    assert again["counts"]["gsm8k"]["cached"] == 1 and again["metrics"] == record["metrics"]
