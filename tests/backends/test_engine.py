"""TorchEngine end to end on tiny checkpoints: chat templates, batching, seeds, fingerprints."""

from __future__ import annotations

import pytest

from dare.backends.engines.torch import TorchEngine
from dare.backends.models.tiny import ARCHITECTURES
from dare.harness.engine import Engine, EngineContext, GenerationRequest
from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig, Message

SETTINGS = {"llada": {"block_length": 8}, "dream": {"block_length": 16, "remasking": "entropy"},
            "sdar": {"block_length": 4, "remasking": "low_confidence_dynamic", "threshold": 0.9},
            "sdar_moe": {"block_length": 4, "remasking": "low_confidence_static"},
            "llada2_moe": {"block_length": 8, "threshold": 0.95}, "llada_moe": {"block_length": 8},
            "mmada": {"block_length": 8}}


def _requests(n=3, same_prompt=False):
    def msgs(i):
        text = "Solve 4+4." if same_prompt else "Solve " + "1+" * (i * 3) + "1."
        prefix = (Message(role="assistant", content="Answer:"),) if i == 1 else ()
        return (Message(role="user", content=text), *prefix)

    return [GenerationRequest(sample_id=f"s{i}", index=i if same_prompt else 0, messages=msgs(i), seed=100 + i)
            for i in range(n)]


@pytest.fixture(scope="module")
def engines(tiny_dirs):
    return {a: TorchEngine(EngineContext(model_name=f"tiny-{a}", model_path=tiny_dirs[a])) for a in ARCHITECTURES}


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_batch_size_does_not_change_greedy_outputs(engines, arch):
    engine = engines[arch]
    assert isinstance(engine, Engine)
    cfg = dict(gen_length=16, steps=16, **SETTINGS[arch])
    requests = _requests()
    engine.prepare(requests, DecodingConfig(**cfg))
    single = engine.generate(requests, DecodingConfig(**cfg, batch_size=1))
    batched = engine.generate(requests, DecodingConfig(**cfg, batch_size=3))
    assert [g.token_ids for g in single] == [g.token_ids for g in batched]
    assert [g.sample_id for g in batched] == ["s0", "s1", "s2"]
    assert all(g.nfe and g.nfe > 0 and len(g.token_ids) == 16 for g in batched)


@pytest.mark.parametrize("arch", ["llada", "sdar", "llada2_moe"])
def test_seed_reproduces_and_temperature_diversifies(engines, arch):
    engine = engines[arch]
    cfg = DecodingConfig(gen_length=16, steps=16, temperature=1.0, batch_size=2,
                         extra={"torch": {"record_trajectory": True}}, **SETTINGS[arch])
    first = engine.generate(_requests(4, same_prompt=True), cfg)
    again = engine.generate(_requests(4, same_prompt=True)[2:], cfg)
    assert [g.token_ids for g in first[2:]] == [g.token_ids for g in again]
    assert len({tuple(g.token_ids) for g in first}) > 1
    trajectory = first[0].trajectory
    assert trajectory is not None and len(trajectory.commit_step) == 16 and trajectory.nfe == first[0].nfe


def test_chat_template_and_assistant_prefix(engines):
    engine = engines["llada"]
    ids = engine.prompt_ids(_requests(2)[1].messages)
    text = engine.model.tokenizer.decode(ids)
    assert text.startswith("<|startoftext|><|start_header_id|>user") and text.endswith(
        "<|start_header_id|>assistant<|end_header_id|>\n\nAnswer:")


def test_model_info_fingerprint_is_stable_and_content_sensitive(tiny_dirs, engines, tmp_path):
    from dare.backends.models.tiny import write_tiny_checkpoint

    info = engines["sdar"].model_info()
    assert info.architecture == "sdar" and info.fingerprint == engines["sdar"].model_info().fingerprint
    other = write_tiny_checkpoint("sdar", tmp_path / "other", seed=123)
    other_info = TorchEngine(EngineContext(model_name="x", model_path=other)).model_info()
    assert other_info.fingerprint != info.fingerprint
    assert set(info.fingerprint_parts) >= {"config.json", "tokenizer.json", "model.safetensors"}


def test_bad_decoding_settings_are_reported(engines):
    with pytest.raises(ConfigError, match="not available for sdar"):
        engines["sdar"].prepare(_requests(1), DecodingConfig(gen_length=8, steps=8, block_length=4, remasking="origin"))
    with pytest.raises(ConfigError, match="not divisible by the number of blocks"):
        engines["llada"].prepare(_requests(1), DecodingConfig(gen_length=16, steps=3, block_length=8))


def test_defaults_without_model_spec(engines):
    assert engines["sdar"].decoding_defaults()["block_length"] == 4
    assert engines["dream"].decoding_defaults()["remasking"] == "entropy"
