"""DecodingConfig -> lmdeploy / SGLang option mappings, and the engines' behaviour without the packages."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from dare.backends.engines.mapping import lmdeploy_options, sglang_options
from dare.harness.engine import EngineContext, GenerationRequest
from dare.harness.errors import ConfigError, PrerequisiteError
from dare.harness.records import DecodingConfig, Message
from dare.harness.registry import engines

SDAR = {"gen_length": 16, "steps": 16, "block_length": 4}
LLADA2 = {"gen_length": 64, "steps": 64, "block_length": 32}


def test_lmdeploy_static_and_dynamic():
    static = lmdeploy_options(DecodingConfig(**SDAR, remasking="low_confidence_static", batch_size=8), "sdar")
    assert static.engine == {"dllm_block_length": 4, "dllm_denoising_steps": 4, "max_batch_size": 8,
                             "dllm_unmasking_strategy": "low_confidence_static"}
    assert static.sampling == {"do_sample": False, "max_new_tokens": 16, "ignore_eos": False}
    dynamic = lmdeploy_options(DecodingConfig(**SDAR, threshold=0.9), "sdar_moe")
    assert dynamic.engine["dllm_unmasking_strategy"] == "low_confidence_dynamic"
    assert dynamic.engine["dllm_confidence_threshold"] == 0.9
    named = lmdeploy_options(DecodingConfig(**SDAR, remasking="low_confidence_dynamic",
                                            extra={"confidence_threshold": 0.8}), "sdar")
    assert named.engine["dllm_confidence_threshold"] == 0.8
    sampled = lmdeploy_options(DecodingConfig(**SDAR, temperature=0.7, top_k=20, stop_at_eos=False), "sdar")
    assert sampled.sampling == {"do_sample": True, "temperature": 0.7, "top_p": 1.0, "top_k": 20,
                                "max_new_tokens": 16, "ignore_eos": True}


def test_lmdeploy_threshold_floor_must_match():
    cfg = {"gen_length": 16, "steps": 8, "block_length": 4, "remasking": "low_confidence_dynamic", "threshold": 0.9}
    with pytest.raises(ConfigError, match="floor of 2 tokens per step"):
        lmdeploy_options(DecodingConfig(**cfg), "sdar")
    assert lmdeploy_options(DecodingConfig(**cfg, extra={"threshold_rule": "top1"}), "sdar").engine[
        "dllm_denoising_steps"] == 2


def test_lmdeploy_refuses_everything_it_cannot_express_at_once():
    cfg = DecodingConfig(**SDAR, remasking="editing", cfg_scale=1.0, factor=1.0, cache="dual", alg_temp=0.5,
                         extra={"logits_eos_inf": True})
    with pytest.raises(ConfigError) as err:
        lmdeploy_options(cfg, "llada")
    message = str(err.value)
    for needle in ("SDAR models only", "cfg_scale", "factor", "cache", "alg_temp", "logits_eos_inf", "editing"):
        assert needle in message
    assert "\n" not in message
    with pytest.raises(ConfigError, match="greedy"):
        lmdeploy_options(DecodingConfig(**SDAR, top_p=0.9), "sdar")


def test_sglang_low_confidence_and_static():
    opts = sglang_options(DecodingConfig(**LLADA2, threshold=0.95, batch_size=4), "llada2_moe")
    assert opts.engine == {"dllm_algorithm": "LowConfidence", "max_running_requests": 4, "trust_remote_code": True}
    assert opts.algorithm_config == {"block_size": 32, "threshold": 0.95}
    assert opts.sampling == {"temperature": 0.0, "max_new_tokens": 64, "ignore_eos": False}
    static = sglang_options(DecodingConfig(**SDAR, remasking="low_confidence_static"), "sdar")
    assert static.algorithm_config == {"block_size": 4, "threshold": 1.0}
    with pytest.raises(ConfigError, match="one token per step"):
        sglang_options(DecodingConfig(gen_length=16, steps=8, block_length=4, remasking="low_confidence_static"),
                       "sdar")


def test_sglang_joint_threshold():
    cfg = DecodingConfig(**LLADA2, remasking="editing", threshold=0.7,
                         extra={"editing_threshold": 0.5, "max_post_steps": 8})
    opts = sglang_options(cfg, "llada2_moe")
    assert opts.engine["dllm_algorithm"] == "JointThreshold"
    assert opts.algorithm_config == {"block_size": 32, "threshold": 0.7, "edit_threshold": 0.5,
                                     "max_post_edit_steps": 8, "penalty_lambda": 0}


def test_sglang_refuses_sampling_and_other_families():
    with pytest.raises(ConfigError) as err:
        sglang_options(DecodingConfig(**LLADA2, temperature=0.5, top_k=5, remasking="sequential"), "dream")
    for needle in ("not dream", "temperature", "top_k", "sequential"):
        assert needle in str(err.value)


def _request():
    return [GenerationRequest(sample_id="s0", index=0, seed=1, messages=(Message(role="user", content="Hi"),))]


@pytest.mark.parametrize("name", ["lmdeploy", "sglang"])
def test_engines_check_options_before_the_package(tiny_dirs, name):
    engine = engines.get(name)(EngineContext(model_name="tiny-sdar", model_path=tiny_dirs["sdar"]))
    with pytest.raises(ConfigError):
        engine.prepare(_request(), DecodingConfig(**SDAR, cfg_scale=2.0))
    if importlib.util.find_spec(name) is not None and torch.cuda.is_available():
        pytest.skip(f"{name} and a GPU are present: tests/gpu covers the real engine")
    with pytest.raises(PrerequisiteError) as err:
        engine.prepare(_request(), DecodingConfig(**SDAR, remasking="low_confidence_static"))
    assert "pip install" in str(err.value) and "\n" not in str(err.value)
    assert engine.model_info().architecture == "sdar"
