"""The recorded contract for the engines that wrap other packages (lmdeploy, SGLang, transformers).

lmdeploy and SGLang need CUDA packages that do not exist here, and nothing below starts them: the engines
load lazily, so their typed options, refusals, decoder declarations, records and cache keys are checked
through ``dare.plan`` / ``dare-eval --dry-run`` / ``build_record`` on the shipped tiny SDAR (a real
checkpoint, read for its config only). tests/gpu/test_fast_engines_cuda.py covers the started engines.
Before these declarations every ``--set engine.X`` reached these engines as an untyped dict: a typo was
accepted, ``extra.lmdeploy`` changed the hash without a record of the engine settings, and run.json showed
``backend.options: {}``.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import dare
from dare.backends.engines.serving_options import engine_kwargs
from dare.harness import cli
from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig
from dare.harness.runner import build_record

SDAR = ["--model", "tiny-sdar", "--suite", "sudoku", "--limit", "2", "--no-progress", "--dry-run"]
DYNAMIC = ["remasking=low_confidence_dynamic", "threshold=0.9"]


def _dry_run(capsys, tmp_path, engine: str, *sets: str) -> tuple[int, str, str]:
    args = [*SDAR, "--backend", engine, "--out", str(tmp_path)]
    for item in sets:
        args += ["--set", item]
    code = cli.main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("engine, setting, message", [
    ("lmdeploy", "engine.tpp=2", "engine.tpp: unknown option; did you mean 'tp'"),
    ("lmdeploy", "engine.quant_policy=3", "engine.quant_policy: Input should be 0, 4 or 8"),
    ("lmdeploy", 'extra={"lmdeploy": {"tp": 2}}',
     "extra.lmdeploy: engine options are typed: set them with --set engine"),
    ("sglang", "engine.tp_siz=2", "engine.tp_siz: unknown option; did you mean 'tp_size'"),
    ("sglang", "engine.mem_fraction_static=1.5", "engine.mem_fraction_static: Input should be less than 1"),
    ("sglang", 'extra={"sglang": {"tp_size": 2}}', "extra.sglang: engine options are typed"),
])
def test_engine_option_typos_exit_2_with_one_line(capsys, tmp_path, engine, setting, message):
    code, out, err = _dry_run(capsys, tmp_path, engine, setting)
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and message in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("engine", ["lmdeploy", "sglang"])
def test_a_typo_in_the_dynamic_rules_extra_is_refused_with_did_you_mean(capsys, tmp_path, engine):
    code, _, err = _dry_run(capsys, tmp_path, engine, *DYNAMIC, 'extra={"threshold_rul": "top1"}')
    assert code == 2 and "extra.threshold_rul: unknown option; did you mean 'threshold_rule'" in err


@pytest.mark.parametrize("engine", ["lmdeploy", "sglang"])
def test_a_field_the_strategy_does_not_read_is_refused(capsys, tmp_path, engine):
    # tiny-sdar's default is low_confidence_static: neither engine reads a threshold with it
    code, _, err = _dry_run(capsys, tmp_path, engine, "threshold=0.9")
    assert code == 2 and err.count("\n") == 1
    assert f"threshold=0.9 is not read by decoder {engine}:low_confidence_static" in err
    assert f"{engine}:low_confidence_dynamic" in err  # named as a decoder that reads it


def test_sglang_refuses_sampling_it_cannot_do(capsys, tmp_path):
    code, _, err = _dry_run(capsys, tmp_path, "sglang", "temperature=0.7")
    assert code == 2 and "temperature=0.7 is not read by decoder sglang:low_confidence_static" in err
    assert "no decoder of this engine reads it" in err


def _plan(tmp_path, engine: str, *sets: str):
    return dare.plan(model="tiny-sdar", suite="sudoku", engine=engine, overrides=[*DYNAMIC, *sets], limit=2,
                     out=tmp_path)


@pytest.mark.parametrize("engine, token_option, execution_option", [
    ("lmdeploy", "engine.tp=2", "engine.cache_max_entry_count=0.5"),
    ("lmdeploy", "engine.quant_policy=8", "engine.cache_max_entry_count=0.5"),
    ("sglang", "engine.attention_backend=triton", "engine.mem_fraction_static=0.6"),
    ("sglang", "engine.tp_size=2", "engine.mem_fraction_static=0.6"),
])
def test_token_changing_options_key_the_cache_and_memory_fractions_do_not(tmp_path, engine, token_option,
                                                                          execution_option):
    base = _plan(tmp_path, engine)
    changed, execution = _plan(tmp_path, engine, token_option), _plan(tmp_path, engine, execution_option)
    assert base.decoding.config_hash() == changed.decoding.config_hash()  # engine settings are not decoding
    assert changed.generation_key() != base.generation_key()
    assert execution.generation_key() == base.generation_key()
    key, value = token_option.removeprefix("engine.").split("=")
    assert str(changed.engine_identity()[key]) == value and changed.engine_identity()["device"] == "cuda"
    assert execution_option.removeprefix("engine.").split("=")[0] not in execution.engine_identity()


def test_the_record_holds_engine_options_decoder_and_its_threshold_rule(tmp_path):
    plan = _plan(tmp_path, "lmdeploy", "engine.tp=2", "engine.cache_max_entry_count=0.5",
                 'extra={"confidence_threshold": 0.8}')
    record = build_record(plan, tmp_path / "run", "complete", datetime.now(timezone.utc), {}, plan.model_info(),
                          {}, {}, {}, {})
    assert record.backend.name == "lmdeploy"
    assert record.backend.options["tp"] == 2 and record.backend.options["cache_max_entry_count"] == 0.5
    assert record.engine_identity["tp"] == 2 and "cache_max_entry_count" not in record.engine_identity
    assert record.decoder.name == "lmdeploy:low_confidence_dynamic"
    assert record.decoder.options == {"confidence_threshold": 0.8, "threshold_rule": "quota"}
    assert "plus every masked position with confidence above threshold" in record.decoder.rules["threshold"]
    assert "threshold" in record.decoding_fields and "temperature" in record.decoding_fields


def test_typed_options_reach_the_engine_constructor_and_defaults_stay_the_engines(tmp_path):
    plan = _plan(tmp_path, "lmdeploy", "engine.tp=2")
    mapped = plan.engine._engine_options(plan.decoding)  # what _start passes to PytorchEngineConfig
    assert mapped.engine["tp"] == 2 and mapped.engine["dllm_unmasking_strategy"] == "low_confidence_dynamic"
    assert "session_len" not in mapped.engine and "cache_max_entry_count" not in mapped.engine  # None: lmdeploy's
    plan = _plan(tmp_path, "sglang", "engine.attention_backend=triton")
    assert plan.engine._engine_options(plan.decoding).engine["attention_backend"] == "triton"
    assert engine_kwargs(plan.engine.options) == {"tp_size": 1, "dtype": "auto", "kv_cache_dtype": "auto",
                                                  "attention_backend": "triton"}


def test_an_engine_built_directly_refuses_a_bad_option_in_one_line(tiny_dirs):
    from dare.harness.engine import EngineContext
    from dare.harness.registry import engines

    with pytest.raises(ConfigError, match="engine.tpp: unknown option; did you mean 'tp'"):
        engines.get("lmdeploy")(EngineContext(model_name="tiny-sdar", model_path=tiny_dirs["sdar"], options={"tpp": 2}))


def test_transformers_engine_declares_typed_options_and_identity(tmp_path):
    from dare.backends.engines.transformers_native import TransformersEngine, write_tiny_checkpoint
    from dare.harness.engine import EngineContext

    path = write_tiny_checkpoint(tmp_path / "gemma")
    with pytest.raises(ConfigError, match="engine.dtyp: unknown option; did you mean 'dtype'"):
        TransformersEngine(EngineContext(model_name="g", model_path=path, options={"dtyp": "bfloat16"}))
    fp32 = TransformersEngine(EngineContext(model_name="g", model_path=path, device="cpu",
                                            options={"dtype": "float32", "threads": 1}))
    bf16 = TransformersEngine(EngineContext(model_name="g", model_path=path, device="cpu",
                                            options={"dtype": "bfloat16"}))
    assert fp32.token_identity() == {"dtype": "float32", "device": "cpu"}  # threads: execution only
    assert bf16.token_identity() != fp32.token_identity()


def test_every_registered_engine_declares_typed_options():
    from dare.harness.engine import EngineBase
    from dare.harness.registry import engines, load_plugins

    load_plugins()
    undeclared = []
    for name in engines.names():
        if name == "opencompass":  # a wrapper: its inner engine's options, validated by that engine
            continue
        cls = engines.get(name)
        if not (isinstance(cls, type) and issubclass(cls, EngineBase)):
            undeclared.append(name)
    assert undeclared == []


def test_decoding_config_fields_named_by_the_serving_declarations_exist():
    from dare.backends.engines.serving_options import LMDEPLOY_DECODERS, SGLANG_DECODERS

    for table in (LMDEPLOY_DECODERS, SGLANG_DECODERS):
        for reads, _, rules in table.values():
            assert reads <= set(DecodingConfig.model_fields) and set(rules) <= reads
