"""The recorded contract, part 1: typed options and decoding fields refused before anything is generated.

Each test runs ``dare-eval`` in this process (``cli.main``) with ``--dry-run`` or a refusal, so nothing is
decoded. On the code before the contract every refused setting here was accepted silently.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dare
from dare.harness import cli
from dare.harness.records import DecodingConfig

TINY_SDAR = ["--model", "tiny-sdar", "--suite", "sudoku", "--limit", "2", "--no-progress"]


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("setting, message", [
    ("engine.dtyp=bfloat16", "engine.dtyp: unknown option; did you mean 'dtype'?"),
    ("verifier.bogus=1", "verifier.bogus: unknown option"),
    ('extra={"step_schedul": "ascending"}', "extra.step_schedul: unknown option; did you mean 'step_schedule'?"),
    ("engine.dtype=bf16", "engine.dtype: Input should be 'float32', 'bfloat16' or 'float16'"),
])
def test_typos_exit_2_with_one_line(capsys, tmp_path, setting, message):
    code, out, err = _run(capsys, *TINY_SDAR, "--out", str(tmp_path), "--dry-run", "--set", setting)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # refused before any run directory or cache exists


def test_a_field_the_decoder_does_not_read_is_refused_naming_the_decoders_that_read_it(capsys, tmp_path):
    # tiny-sdar decodes with block:low_confidence_static, which never looks at a threshold: before the
    # contract threshold=0.9 gave a new config_hash with byte-identical completions and NFE.
    code, _, err = _run(capsys, *TINY_SDAR, "--out", str(tmp_path), "--set", "threshold=0.9")
    assert code == 2 and err.count("\n") == 1
    assert "threshold=0.9 is not read by decoder block:low_confidence_static" in err
    readers = re.search(r"it is read by ([^)]*)\)", err).group(1).split(", ")
    assert {"block:low_confidence", "block:low_confidence_dynamic", "block:editing"} <= set(readers)
    assert "block:low_confidence_static" not in readers and "block:sequential" not in readers
    # the same setting with a decoder that reads it is accepted and changes the hash
    code, out, _ = _run(capsys, *TINY_SDAR, "--out", str(tmp_path), "--dry-run",
                        "--set", "remasking=low_confidence_dynamic", "--set", "threshold=0.9")
    assert code == 0 and '"threshold":0.9' in out


def test_unread_model_settings_are_reset_so_the_hash_follows_what_the_decoder_sees():
    from dare.harness.options import DecoderInfo
    from dare.harness.resolve import check

    info = DecoderInfo("block:low_confidence_static", "1", frozenset({"gen_length", "steps", "block_length",
                                                                     "remasking", "seed"}))
    plain = DecodingConfig(gen_length=32, steps=32, block_length=4, remasking="low_confidence_static")
    with_threshold = plain.model_copy(update={"threshold": 0.9})  # e.g. from a model's suite settings
    a, b = check(plain, info, set()), check(with_threshold, info, set())
    fields, a, b = a.fields, a.config, b.config
    assert a.config_hash() == b.config_hash() == plain.config_hash() != with_threshold.config_hash()
    assert "threshold" not in fields and {"gen_length", "num_samples", "batch_size"} <= set(fields)


def test_dry_run_prints_the_resolved_plan_without_generating(capsys, tmp_path):
    code, out, _ = _run(capsys, *TINY_SDAR, "--out", str(tmp_path), "--dry-run", "--set", "engine.dtype=bfloat16")
    assert code == 0
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert lines["engine"].startswith("torch ") and '"dtype":"bfloat16"' in lines["engine"]
    assert '"dtype":"bfloat16"' in lines["engine identity (generation cache key)"]
    assert lines["decoder"].startswith("block:low_confidence_static ")
    expected = DecodingConfig(gen_length=32, steps=32, block_length=4, remasking="low_confidence_static",
                              batch_size=64).config_hash()
    assert lines["decoding"].startswith(f"config_hash {expected} ")
    assert re.search(r"sudoku: data sudoku_test.jsonl sha256 [0-9a-f]{64}; prompt dare_sudoku hash [0-9a-f]{16}", out)
    assert '"accept_alternative_solutions":true' in out
    assert not (tmp_path / ".cache").exists() and not list(tmp_path.glob("*"))


def test_the_library_entry_point_is_what_the_cli_calls(tmp_path):
    p = dare.plan(model="tiny-sdar", suite="sudoku",
                  overrides=["engine.dtype=bfloat16", "verifier.accept_alternative_solutions=false"],
                  limit=2, out=tmp_path)
    assert p.engine.options.dtype == "bfloat16" and p.engine_identity()["dtype"] == "bfloat16"
    assert p.verifier_options_for("sudoku") == {"accept_alternative_solutions": False}
    assert "decoding: config_hash" in dare.describe(p)


RESOLUTION_SITES = ["harness/cli.py", "trainers/training/trainer.py", "trainers/experiments/compare.py",
                    "backends/opencompass/model.py", "backends/opencompass/configs.py"]


def test_decoding_is_resolved_in_one_place_and_records_built_in_one():
    root = Path(__file__).resolve().parents[2]
    for site in RESOLUTION_SITES:
        text = (root / site).read_text()
        assert ".decoding_for(" not in text and "decoding_defaults()" not in text, site
    assert "resolve_decoding(" in (root / "harness/plan.py").read_text()
    assert ".decoding_for(" not in (root / "harness/plan.py").read_text()
    builders = [p.relative_to(root).as_posix() for folder in ("harness", "backends", "trainers")
                for p in sorted((root / folder).rglob("*.py")) if re.search(r"(?<!class )\bRunRecord\(", p.read_text())]
    assert builders == ["harness/runner.py"]


@pytest.mark.parametrize("model, engine, settings, refused", [
    ("tiny-dream", "torch", ["remasking=origin", "threshold=0.9"], "threshold=0.9 is not read by decoder dream:origin"),
    ("tiny-dream", "torch", ["remasking=entropy", "threshold=0.9"], None),
    ("tiny-dream", "torch", ["remasking=origin", "alg_temp=0.5"], "alg_temp=0.5 is not read by decoder dream:origin"),
    ("tiny-sdar", "torch", ["factor=1.0"], "factor=1.0 is not read by decoder block:low_confidence_static "
                                           "(no decoder of this engine reads it)"),
    ("tiny-llada", "torch", ["cache=prefix"], "cache='prefix' is not read by decoder mdm:low_confidence"),
    ("tiny-llada", "fastdllm", ["cache=prefix", "threshold=0.9"], None),
    ("tiny-llada", "torch", ['extra={"eps": 0.01}'], "extra.eps: unknown option"),
    ("tiny-dream", "torch", ['extra={"eps": 0.01}'], None),
])
def test_each_decoder_declares_what_it_reads(capsys, tmp_path, model, engine, settings, refused):
    sets = [arg for s in settings for arg in ("--set", s)]
    code, out, err = _run(capsys, "--model", model, "--suite", "sudoku", "--limit", "1", "--backend", engine,
                          "--out", str(tmp_path), "--dry-run", *sets)
    if refused is None:
        assert code == 0, err
    else:
        assert code == 2 and refused in err and err.count("\n") == 1


def test_the_unsafe_exec_flag_reaches_only_the_verifiers_that_declare_it(capsys, tmp_path):
    code, out, err = _run(capsys, *TINY_SDAR, "--out", str(tmp_path), "--dry-run", "--unsafe-local-exec")
    assert code == 0, err
    assert "unsafe_local_exec" not in out  # sudoku's verifier has no such option
    p = dare.plan(model="tiny-sdar", suite="humaneval", limit=1, out=tmp_path, unsafe_local_exec=True)
    assert p.verifier_options_for("humaneval")["unsafe_local_exec"] is True and "unsafe-local-exec" in p.flags
