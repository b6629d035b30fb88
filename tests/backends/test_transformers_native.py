"""The ``transformers`` engine on a tiny random DiffusionGemma: transformers' own model and generate, our
DecodingConfig mapped onto it (unsupported fields refused), per-request seeds, and dare-eval end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dare.backends.engines.transformers_native import (
    REMASKING,
    TransformersEngine,
    generation_options,
    write_tiny_checkpoint,
)
from dare.harness import config
from dare.harness.engine import EngineContext, GenerationRequest
from dare.harness.errors import ConfigError, ModelError
from dare.harness.records import DecodingConfig, Message

CANVAS = 8
DARE_EVAL = shutil.which("dare-eval", path=str(Path(sys.executable).parent)) or shutil.which("dare-eval")


def small(**fields) -> DecodingConfig:
    return DecodingConfig(**{"gen_length": 16, "steps": 8, "block_length": CANVAS, "remasking": REMASKING, **fields})


def request(content: str, seed: int, sample_id: str = "s", *prefix: str) -> GenerationRequest:
    messages = (Message(role="user", content=content), *(Message(role="assistant", content=p) for p in prefix))
    return GenerationRequest(sample_id=sample_id, index=0, messages=messages, seed=seed)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("diffusion_gemma") / "tiny", seed=0, canvas_length=CANVAS)


@pytest.fixture(scope="module")
def engine(tiny_dir) -> TransformersEngine:
    return TransformersEngine(EngineContext(model_name="tiny-diffusion-gemma", model_path=tiny_dir, device="cpu"))


def test_mapping_translates_steps_per_canvas_and_algorithm_options():
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationConfig

    assert generation_options(small(), CANVAS) == {"max_new_tokens": 16, "max_denoising_steps": 4}
    extra = {"transformers": {"t_min": 0.2, "t_max": 0.6, "entropy_bound": 1, "stability_threshold": 2},
             "confidence_threshold": 0.01}
    options = generation_options(small(steps=6, extra=extra), CANVAS)
    assert options["max_denoising_steps"] == 3 and options["t_min"] == 0.2 and options["t_max"] == 0.6
    assert options["sampler_config"].entropy_bound == 1.0 and options["stability_threshold"] == 2
    DiffusionGemmaGenerationConfig(**options)  # transformers' own validation accepts the mapped options


@pytest.mark.parametrize("fields, named", [
    ({"temperature": 0.7}, "temperature"), ({"threshold": 0.9}, "threshold"), ({"factor": 1.0}, "factor"),
    ({"top_p": 0.9}, "top_p"), ({"top_k": 5}, "top_k"), ({"cfg_scale": 1.5}, "cfg_scale"),
    ({"alg_temp": 0.1}, "alg_temp"), ({"stop_at_eos": False}, "stop_at_eos"), ({"cache": "prefix"}, "cache"),
    ({"remasking": "low_confidence"}, "remasking"), ({"block_length": 4}, "block_length"),
    ({"steps": 7}, "steps"), ({"extra": {"logits_eos_inf": True}}, "logits_eos_inf"),
    ({"extra": {"transformers": {"t_min": 0.3}}}, "t_max"),
    ({"extra": {"transformers": {"entropy_bound": -1.0}}}, "entropy_bound"),
    ({"extra": {"torch": {"record_trajectory": True}}}, "extra.torch"),
])
def test_mapping_refuses_what_it_cannot_express(fields, named):
    with pytest.raises(ConfigError) as err:
        generation_options(small(**fields), CANVAS)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_engine_generates_the_requested_tokens(engine, tiny_dir):
    decoding = small()
    requests = [request("1+1?", seed=1, sample_id="a"), request("2+2?", seed=2, sample_id="b")]
    engine.prepare(requests, decoding)
    stop_ids, _ = engine._special_ids()
    for out in engine.generate(requests, decoding):
        if out.finish_reason == "length":
            assert len(out.token_ids) == 16 and not set(out.token_ids) & set(stop_ids)
        else:  # EOS ended it: ids end at the first stop token, never past the canvas budget
            assert out.token_ids[-1] in stop_ids and len(out.token_ids) <= 16
        assert 0 < out.nfe <= decoding.steps
    info = engine.model_info()
    assert info.architecture == "diffusion_gemma" and "generation_config.json" in info.fingerprint_parts


def test_seed_reproduces_and_batching_does_not_matter(engine):
    decoding = small()
    a, b = request("hello", seed=11, sample_id="a"), request("hello", seed=12, sample_id="b")
    together = engine.generate([a, b], decoding)
    alone = engine.generate([b], decoding)[0]
    again = engine.generate([a], decoding)[0]
    assert together[1].token_ids == alone.token_ids and together[0].token_ids == again.token_ids
    assert together[0].token_ids != together[1].token_ids  # the seed, not the prompt, drives the noise


def test_chat_template_applied_and_trailing_assistant_continued(engine):
    ids = engine.prompt_ids(request("hi", 0, "s", "[BEGIN]").messages)
    text = engine.tokenizer.decode(ids)
    assert text.startswith("<bos><start_of_turn>user\nhi<end_of_turn>\n")
    assert text.endswith("<start_of_turn>model\n[BEGIN]")


def test_spec_decoding_that_does_not_fit_the_checkpoint_is_refused(tiny_dir):
    spec = config.model("diffusion-gemma-26b-a4b-it")
    engine = TransformersEngine(EngineContext(model_name=spec.name, model_spec=spec, model_path=tiny_dir))
    assert engine.decoding_defaults() == {}
    decoding = config.decoding_with_overrides(spec.decoding_for("math"), {})
    with pytest.raises(ConfigError, match="block_length=256.*canvas_length is 8"):
        engine.prepare([], decoding)


def test_rejects_other_checkpoints_and_unknown_options(tmp_path, tiny_dir):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma"}))
    with pytest.raises(ModelError, match="'gemma' checkpoint"):
        TransformersEngine(EngineContext(model_name="x", model_path=tmp_path))
    with pytest.raises(ConfigError, match="engine.record_trajectory"):
        TransformersEngine(EngineContext(model_name="x", model_path=tiny_dir, options={"record_trajectory": True}))


def test_a_dllm_transformers_cannot_read_is_refused_in_one_line_naming_the_backend(tmp_path):
    """tiny-sdar's config declares model_type 'sdar', which transformers does not know: the refusal is the
    one-line fix (another backend), not transformers' several-line advice to upgrade."""
    with pytest.raises(ModelError) as err:
        TransformersEngine(EngineContext(model_name="tiny-sdar",
                                         model_path=config.SHIPPED_CONFIGS / "models" / "tiny-sdar"))
    text = str(err.value)
    assert "'sdar' checkpoint" in text and "--backend torch" in text and "\n" not in text, text


@pytest.mark.extended
@pytest.mark.skipif(DARE_EVAL is None, reason="dare-eval console script is not installed")
def test_dare_eval_runs_sudoku_with_the_transformers_backend(tiny_dir, tmp_path):
    cmd = [DARE_EVAL, "--model-path", str(tiny_dir), "--backend", "transformers", "--suite", "sudoku",
           "--limit", "2", "--out", str(tmp_path / "runs"), "--no-progress", "--device", "cpu",
           # gen_length must divide by the default block_length (32) for the CLI's early check; the engine's
           # decoding_defaults then set block_length to the checkpoint's canvas (8): 4 canvases of 2 steps
           "--set", "gen_length=32", "--set", "steps=8", "--set", "engine.threads=1"]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    (run_json,) = (tmp_path / "runs").glob("*/run.json")
    record = json.loads(run_json.read_text())
    assert record["status"] == "complete" and record["backend"]["name"] == "transformers"
    assert record["model"]["architecture"] == "diffusion_gemma"
    assert record["decoding"]["block_length"] == CANVAS and record["decoding"]["remasking"] == REMASKING
    samples = [json.loads(line) for line in (run_json.parent / "samples.jsonl").read_text().splitlines() if line]
    assert len(samples) == 2
