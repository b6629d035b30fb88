"""GPU checks of the Fast-dLLM engine and the serving engines. Skips without CUDA.

    pytest tests/gpu/test_fast_engines_cuda.py -m gpu -s

- the cached decoder agrees with the reference on CUDA for a frozen-key model (float32; >= 97 % of tokens,
  since CUDA kernels differ by shape in the last bits) and its greedy outputs do not depend on the batch
  size (1, 2, 4) with the dual cache;
- on a moderate random LLaDA (hidden 512, 4 layers, bf16) the dual cache is faster than the reference;
- lmdeploy / sglang: when importable, the engines pass ``prepare`` on a tiny SDAR config (no weights needed).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.backends.decoding.fastdllm import cached_decoder
from dare.backends.models.loader import load_model
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12], [40, 41, 42, 43, 44, 45, 46], [3]]


@pytest.fixture(scope="module")
def frozen_llada(tmp_path_factory):
    model = load_model(write_tiny_checkpoint("llada", tmp_path_factory.mktemp("llada")), device="cuda",
                       dtype=torch.float32)
    with torch.no_grad():
        for layer in model.net.layers[:-1]:
            layer.attn.o.weight.zero_()  # every layer's keys depend on the column's own token only
        model.net.lm_head.weight.mul_(20.0)  # confident enough for threshold commits
    return model


def _agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a == b).float().mean().item()


def _decode(model, prompts, cfg, mode):
    canvas = Canvas.build(prompts, cfg.gen_length, model.mask_id, model.pad_id, "cuda")
    gens = [torch.Generator(device="cuda").manual_seed(3 + i) for i in range(len(prompts))]
    with torch.inference_mode():
        if mode is None:
            return decoders.get("mdm:low_confidence")(model, canvas, cfg, gens)
        return cached_decoder(decoders.get("mdm:low_confidence"), mode)(model, canvas, cfg, gens)


@pytest.mark.parametrize("mode", ["prefix", "dual"])
@pytest.mark.parametrize("threshold", [None, 0.6])
def test_cached_equals_reference_on_cuda(frozen_llada, mode, threshold):
    cfg = DecodingConfig(gen_length=32, steps=32, block_length=8, threshold=threshold)
    ref, got = _decode(frozen_llada, PROMPTS, cfg, None), _decode(frozen_llada, PROMPTS, cfg, mode)
    # CUDA picks attention kernels by shape, so cached and full passes may differ in the last float bits;
    # on CPU the same comparison is exact (tests/backends/test_fastdllm.py)
    assert _agreement(ref.tokens, got.tokens) >= 0.97


def test_dual_cache_batch_invariance_on_cuda(frozen_llada):
    cfg = DecodingConfig(gen_length=32, steps=32, block_length=8, threshold=0.6)
    full = _decode(frozen_llada, PROMPTS, cfg, "dual").tokens
    for size in (1, 2):
        parts = [_decode(frozen_llada, PROMPTS[i:i + size], cfg, "dual").tokens for i in range(0, 4, size)]
        assert _agreement(torch.cat(parts), full) >= 0.97


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("arch", ["llada", "llada_moe", "dream"])
def test_decode_benchmark_runs_every_strategy(arch, batch):
    """Every registered strategy of the family (commit rules, its own loops, caches) runs on CUDA at batch 1
    and 16 on a moderate model of the 8B shapes' layout (speed is reported by benchmarks/gpu_decode.py, not
    asserted); the list comes from the registry, so a new strategy is covered without editing this test."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import gpu_decode

    from dare.harness.registry import caches, decoders

    full = {"llada": gpu_decode.LLADA_8B, "llada_moe": gpu_decode.LLADA_MOE_7B, "dream": gpu_decode.DREAM_7B}[arch]
    config = {**full, **gpu_decode.SMALL[arch], "vocab_size": 8192, "embedding_size": 8192,
              "mask_token_id": 8191, "eos_token_id": 8190}
    model = gpu_decode.build(arch, config, "cuda")
    family = gpu_decode.FAMILY[arch]
    result = gpu_decode.strategy_modes(model, list(range(10, 266)), 64, 32, batch=batch, family=family)
    print(f"moderate {arch}, gen 64, batch {batch}:", result)
    expected = {name for name in decoders.names() if name.startswith(f"{family}:")
                and decoders.get(name).name == name}
    expected |= {f"cache:{mode}" for mode in caches.names() if family in caches.get(mode).families}
    assert expected <= set(result["peak_mib"])  # every strategy ran and its peak memory was read
    assert all(result[label] > 0 for label in expected)


def test_llada_moe_at_its_real_shape_decodes_uncached_and_cached():
    """LLaDA-MoE-7B-A1B's real shape (16 layers, 64 experts top-8, 157,184-row vocabulary; random bf16 weights): the
    default decoder and the dual cache decode a 128-token prompt, one forward per step each."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import gpu_decode

    model = gpu_decode.build("llada_moe", gpu_decode.LLADA_MOE_7B, "cuda")
    assert model.net.args.moe_layers == tuple(range(16)) and model.net.args.num_experts_per_tok == 8
    cfg = DecodingConfig(gen_length=64, steps=64, block_length=32)
    rule = decoders.get("mdm:low_confidence")
    for decode, c in ((rule, cfg), (cached_decoder(rule, "dual"), cfg.model_copy(update={"cache": "dual"}))):
        canvas = Canvas.build([list(range(10, 138))], 64, model.mask_id, model.pad_id, "cuda")
        with torch.inference_mode():
            result = decode(model, canvas, c, [torch.Generator(device="cuda").manual_seed(0)])
        assert result.tokens.shape == (1, 64) and int(result.nfe[0]) == 64
        assert ((result.tokens >= 0) & (result.tokens < 157184) & (result.tokens != model.mask_id)).all()


@pytest.mark.parametrize("name", ["lmdeploy", "sglang"])
def test_serving_engines_prepare_when_installed(tmp_path, name):
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed")
    from dare.harness.engine import EngineContext
    from dare.harness.registry import engines

    path = write_tiny_checkpoint("sdar", tmp_path / "sdar")
    engine = engines.get(name)(EngineContext(model_name="tiny-sdar", model_path=path))
    engine.prepare([], DecodingConfig(gen_length=16, steps=16, block_length=4, remasking="low_confidence_static"))
