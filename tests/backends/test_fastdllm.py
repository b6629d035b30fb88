"""Fast-dLLM decoding: exact where it must be, approximate within a measured bound elsewhere.

Models: the tiny random LLaDA / Dream checkpoints; a *frozen-key* copy whose attention output projection
is zero in every layer but the last (so every layer's keys depend only on the column's own token: the
keys a cache keeps cannot go stale, and cached decoding must equal the reference token for token); and a
*sharp* copy (scaled LM head) whose confidences are high enough for threshold / factor commits to fire.
"""

from __future__ import annotations

import copy

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.backends.decoding.fastdllm import _Forward, cached_decoder
from dare.backends.engines.fastdllm import FastDllmEngine
from dare.backends.engines.torch import TorchEngine
from dare.harness.engine import EngineContext, GenerationRequest
from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig, Message
from dare.harness.registry import decoders, engines

FAMILIES = {"llada": ("low_confidence", "mdm:low_confidence"), "dream": ("entropy", "dream:entropy")}
PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12], [40, 41, 42, 43, 44, 45, 46], [3]]


def _variant(model, frozen_keys=False, sharpen=1.0):
    model = copy.copy(model)
    model.net = copy.deepcopy(model.net)
    with torch.no_grad():
        if frozen_keys:
            for layer in model.net.layers[:-1]:
                layer.attn.o.weight.zero_()
        model.net.lm_head.weight.mul_(sharpen)
    return model


def _run(model, policy_or_ref, cfg, mode=None, prompts=PROMPTS):
    canvas = Canvas.build(prompts, cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    gens = [torch.Generator().manual_seed(7 + i) for i in range(len(prompts))]
    with torch.inference_mode():
        if mode is None:
            return policy_or_ref(model, canvas, cfg, gens)
        return cached_decoder(decoders.get(policy_or_ref), mode)(model, canvas, cfg, gens)


def _reference(model, remasking):
    return decoders.get(f"{model.arch.decoding_family}:{remasking}")


SETTINGS = [{"steps": 16}, {"threshold": 0.6}, {"factor": 1.0}, {"steps": 16, "temperature": 0.7},
            {"steps": 16, "cfg_scale": 1.0}]


@pytest.mark.parametrize("arch", FAMILIES)
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(s))
def test_uncached_loop_equals_reference(tiny_models, arch, settings):
    remasking, policy = FAMILIES[arch]
    model = _variant(tiny_models[arch], sharpen=20.0)
    cfg = DecodingConfig(gen_length=16, block_length=8, remasking=remasking, **{"steps": 16, **settings})
    ref, got = _run(model, _reference(model, remasking), cfg), _run(model, policy, cfg, "none")
    assert torch.equal(got.tokens, ref.tokens) and torch.equal(got.commit_step, ref.commit_step)
    assert torch.equal(got.nfe, ref.nfe)


@pytest.mark.parametrize("arch", FAMILIES)
@pytest.mark.parametrize("mode", ["prefix", "dual"])
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(s))
def test_cache_is_exact_when_cached_keys_cannot_change(tiny_models, arch, mode, settings):
    remasking, policy = FAMILIES[arch]
    model = _variant(tiny_models[arch], frozen_keys=True, sharpen=20.0)
    cfg = DecodingConfig(gen_length=32, block_length=8, remasking=remasking, **{"steps": 32, **settings})
    ref, got = _run(model, _reference(model, remasking), cfg), _run(model, policy, cfg, mode)
    assert torch.equal(got.tokens, ref.tokens) and torch.equal(got.commit_step, ref.commit_step)
    assert torch.equal(got.nfe, ref.nfe)


def test_sharp_model_commits_in_parallel(tiny_models):
    """The threshold path is really exercised: fewer forwards than tokens, and still exact."""
    model = _variant(tiny_models["llada"], frozen_keys=True, sharpen=20.0)
    cfg = DecodingConfig(gen_length=24, steps=24, block_length=8, threshold=0.6)
    got = _run(model, "mdm:low_confidence", cfg, "dual")
    assert (got.nfe < 24).all() and (got.tokens != model.mask_id).all()


@pytest.mark.parametrize("mode", ["none", "dual"])
def test_threshold_one_is_one_token_per_step_low_confidence(tiny_models, mode):
    model = _variant(tiny_models["llada"], frozen_keys=True)
    base = {"gen_length": 16, "steps": 16, "block_length": 8}
    ref = _run(model, _reference(model, "low_confidence"), DecodingConfig(**base))
    got = _run(model, "mdm:low_confidence", DecodingConfig(**base, threshold=1.0), mode)
    assert torch.equal(got.tokens, ref.tokens) and torch.equal(got.commit_step, ref.commit_step)


@pytest.mark.parametrize("arch", FAMILIES)
@pytest.mark.parametrize("mode", ["prefix", "dual"])
def test_cache_error_is_bounded_on_a_generic_model(tiny_models, arch, mode):
    """On an ordinary model the cached logits differ from a full pass (the approximation is real), but
    they follow most of the change that commits inside the block cause: |cached - exact| is at most 0.75 of
    |stale - exact| (the logits before the commits); measured ~0.4 on these models."""
    model = tiny_models[arch]
    cfg = DecodingConfig(gen_length=24, steps=24, block_length=8, remasking=FAMILIES[arch][0])
    canvas = Canvas.build(PROMPTS, 24, model.mask_id, model.pad_id, "cpu")
    x, lo = canvas.tokens.clone(), canvas.gen_start + 8
    x[:, canvas.gen_start:lo] = 65  # a finished first block; the third block is a masked suffix
    with torch.inference_mode():
        cached = _Forward(model, canvas, cfg, None, lo, mode)
        stale, _ = cached(x, first=True)
        x[:, lo:lo + 3] = 66  # commits inside the active block
        approx, _ = cached(x, first=False)
        exact, _ = _Forward(model, canvas, cfg, None, lo, "none")(x, first=True)
    ratio = ((approx - exact).norm() / (stale - exact).norm()).item()
    assert 0 < ratio < 0.75


def test_cache_is_batch_row_local(tiny_models):
    """Rows never mix: each row decodes the same alone as in a left-padded batch of 2 or 4."""
    model = _variant(tiny_models["dream"], sharpen=20.0)
    cfg = DecodingConfig(gen_length=16, steps=16, block_length=8, remasking="entropy", threshold=0.6)
    batch = _run(model, "dream:entropy", cfg, "dual")
    for r, prompt in enumerate(PROMPTS):
        alone = cached_decoder(decoders.get("dream:entropy"), "dual")(
            model, Canvas.build([prompt], 16, model.mask_id, model.pad_id, "cpu"), cfg,
            [torch.Generator().manual_seed(7 + r)])
        assert torch.equal(alone.tokens[0], batch.tokens[r]) and alone.nfe[0] == batch.nfe[r]


def _requests(n=4):
    return [GenerationRequest(sample_id=f"s{i}", index=0, seed=100 + i,
                              messages=(Message(role="user", content="Solve " + "1+" * (i * 3) + "1."),))
            for i in range(n)]


@pytest.fixture(scope="module")
def fast_engines(tiny_dirs):
    return {a: FastDllmEngine(EngineContext(model_name=f"tiny-{a}", model_path=tiny_dirs[a]))
            for a in ("llada", "dream", "sdar")}


def test_engine_is_registered_and_equals_torch_without_cache(fast_engines, tiny_dirs):
    assert engines.get("fastdllm") is FastDllmEngine
    torch_engine = TorchEngine(EngineContext(model_name="tiny-llada", model_path=tiny_dirs["llada"]))
    cfg = DecodingConfig(gen_length=16, steps=8, block_length=8, batch_size=2)
    ref, got = torch_engine.generate(_requests(), cfg), fast_engines["llada"].generate(_requests(), cfg)
    assert [g.token_ids for g in got] == [g.token_ids for g in ref] and [g.nfe for g in got] == [g.nfe for g in ref]


@pytest.mark.parametrize(("arch", "mode"), [("llada", "dual"), ("dream", "dual"), ("dream", "prefix")])
def test_engine_cache_is_batch_invariant(fast_engines, arch, mode):
    remasking = FAMILIES[arch][0]
    outputs = []
    for batch_size in (1, 2, 4):
        cfg = DecodingConfig(gen_length=32, steps=32, block_length=8, remasking=remasking, cache=mode,
                             batch_size=batch_size, extra={"record_trajectory": True})
        outputs.append(fast_engines[arch].generate(_requests(), cfg))
    assert [g.token_ids for g in outputs[0]] == [g.token_ids for g in outputs[1]] == [g.token_ids for g in outputs[2]]
    assert all(g.nfe == 32 and g.trajectory and max(g.trajectory.commit_step) == 31 for g in outputs[2])


def test_engine_update_weights_by_official_or_internal_name(tiny_dirs):
    from safetensors import safe_open

    from dare.harness.errors import ModelError

    engine = FastDllmEngine(EngineContext(model_name="tiny-sdar-moe", model_path=tiny_dirs["sdar_moe"]))
    net = engine.model.net
    for shard in sorted(tiny_dirs["sdar_moe"].glob("*.safetensors")):
        with safe_open(str(shard), "pt") as f:
            names = [n for n in f.keys() if ".experts.1." in n and "down_proj" in n]  # noqa: SIM118
            if names:
                expert_name, expert = names[0], f.get_tensor(names[0])
                break
    layer = int(expert_name.split(".layers.")[1].split(".")[0])
    engine.update_weights([(expert_name, torch.full_like(expert, 0.5)),
                           ("lm_head.weight", torch.zeros_like(net.lm_head.weight))])
    assert (net.layers[layer].mlp.experts_down[1] == 0.5).all() and (net.layers[layer].mlp.experts_down[0] != 0.5).any()
    assert (net.lm_head.weight == 0).all()
    with pytest.raises(ModelError, match="not a parameter"):
        engine.update_weights([("model.nonexistent.weight", torch.zeros(1))])
    with pytest.raises(ModelError, match="shape"):
        engine.update_weights([("lm_head.weight", torch.zeros(2, 2))])


def test_engine_block_models_refuse_approximate_cache(fast_engines):
    sdar = fast_engines["sdar"]
    base = {"gen_length": 8, "steps": 8, "block_length": 4, "remasking": "low_confidence_static"}
    with pytest.raises(ConfigError, match="exact block cache"):
        sdar.prepare(_requests(1), DecodingConfig(**base, cache="dual"))
    assert len(sdar.generate(_requests(1), DecodingConfig(**base))[0].token_ids) == 8


def test_speed_benchmark_reports_ratios_and_accuracy(monkeypatch, capsys):
    """benchmarks/decode_speed.py end to end at toy size: one JSON line with every mode."""
    import json
    import runpy
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "decode_speed.py"
    monkeypatch.setattr(sys, "argv", ["decode_speed.py", "--samples", "4", "--reference-samples", "2",
                                      "--gen-length", "16", "--block-length", "8", "--batch", "2"])
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        torch.set_num_threads(threads)
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(report["speedup"]) == {"prefix", "dual", "dual_threshold"}
    assert all(v > 0 for v in report["speedup"].values())
    assert set(report["accuracy"]) == {"reference", "prefix", "dual", "dual_threshold"}
    assert report["accuracy_n"] == {"reference": 2, "prefix": 4, "dual": 4, "dual_threshold": 4}
    ref = report["results"]["reference"]["passed"]
    for mode, delta in report["accuracy_delta"].items():  # paired over the 2 prompts the reference decoded
        mine = report["results"][mode]["passed"][:2]
        assert delta["n"] == 2 and delta["value"] == pytest.approx(sum(a - b for a, b in zip(mine, ref)) / 2)
        lo, hi = report["accuracy_ci"][mode]
        assert lo <= report["accuracy"][mode] <= hi
