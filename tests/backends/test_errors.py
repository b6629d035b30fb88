"""dLLM-specific bad inputs give one-line ModelErrors that name the problem."""

from __future__ import annotations

import json
import shutil

import pytest
from pydantic import ValidationError

from dare.backends.models.loader import load_model
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.harness.config import decoding_with_overrides
from dare.harness.errors import ConfigError, DareError, ModelError


def _edit_json(path, **changes):
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def test_unknown_architecture(tmp_path):
    path = write_tiny_checkpoint("sdar", tmp_path / "m")
    _edit_json(path / "config.json", architectures=["MambaForCausalLM"], model_type="mamba")
    with pytest.raises(ModelError, match="unknown dLLM architecture MambaForCausalLM"):
        load_model(path)


def test_missing_tensors_are_named(tmp_path):
    path = write_tiny_checkpoint("llada", tmp_path / "m")
    _edit_json(path / "config.json", n_layers=3)  # the checkpoint only has blocks 0 and 1
    with pytest.raises(ModelError, match=r"lacks 9 tensor\(s\).*model\.transformer\.blocks\.2\.attn_norm\.weight"):
        load_model(path)


def test_tokenizer_without_mask_token(tmp_path):
    path = write_tiny_checkpoint("sdar_moe", tmp_path / "m")  # like the 30B: mask only in the tokenizer
    assert load_model(path).mask_id == 261
    _edit_json(path / "tokenizer_config.json", mask_token=None)
    with pytest.raises(ModelError, match="no mask token"):
        load_model(path)


def test_missing_tokenizer_and_weights(tmp_path):
    path = write_tiny_checkpoint("dream", tmp_path / "m")
    (path / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="no tokenizer"):
        load_model(path)
    other = write_tiny_checkpoint("sdar", tmp_path / "w")
    (other / "model.safetensors").unlink()
    with pytest.raises(ModelError, match=r"no \*\.safetensors weights"):
        load_model(other)
    shutil.rmtree(path)
    with pytest.raises(ModelError, match="no config.json"):
        load_model(path)


def test_gen_length_must_be_divisible_by_block_length():
    with pytest.raises(ConfigError, match="not divisible by block_length"):
        decoding_with_overrides({"gen_length": 100, "block_length": 32}, {})
    with pytest.raises(ValidationError):
        from dare.harness.records import DecodingConfig

        DecodingConfig(gen_length=10, block_length=4)


def test_model_errors_are_dare_errors():
    assert issubclass(ModelError, DareError)


def test_model_config_and_checkpoint_disagree(tiny_dirs):
    from dare.backends.models.loader import detect_architecture, read_config

    with pytest.raises(ModelError, match="is a sdar model .* says llada"):
        detect_architecture(read_config(tiny_dirs["sdar"]), "llada")
    assert detect_architecture(read_config(tiny_dirs["sdar"]), "sdar").name == "sdar"
