"""LLaDA-MoE against its authors' network and the reference system's decoding loop.

The fixture (tests/backends/fixtures/llada_moe_official.json and llada_moe_official_logits.safetensors, written by
tests/backends/fixtures/scripts/make_llada_moe_fixture.py) holds what inclusionAI's ``LLaDAMoEModelLM`` (as carried
in ZHZisZZ/dllm) computes on the shipped tiny-llada-moe and on a variant with a dense first layer, a selection bias
and a shared expert, and the tokens and forward counts of yjyddq/DARE's ``generate`` (the loop its OpenCompass
``LLaDAMoEModel`` runs) over that network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dare.backends.engines.fastdllm import FastDllmEngine
from dare.backends.models.loader import detect_architecture, load_model, read_config
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.backends.models.transformer import DiffusionTransformer
from dare.harness import config
from dare.harness.config import SHIPPED_CONFIGS
from dare.harness.engine import EngineContext, GenerationRequest
from dare.harness.records import DecodingConfig, Message

from . import llada_cases

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

VARIANT = {"num_hidden_layers": 3, "moe_layer_freq": [0, 1, 1], "moe_router_enable_expert_bias": True,
           "shared_expert_intermediate_size": 48, "num_key_value_heads": 2, "partial_rotary_factor": 0.5}
FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE = json.loads((FIXTURES / "llada_moe_official.json").read_text())
OFFICIAL = load_file(FIXTURES / "llada_moe_official_logits.safetensors")
TINY = SHIPPED_CONFIGS / "models" / "tiny-llada-moe"
# measured: float32 1.7e-6 on logits up to 3.5 (tiny and variant); bfloat16 0.023, the size of bfloat16 rounding
# itself (their own bfloat16 and float32 logits differ by 0.025): their rotary tables are rounded to bfloat16,
# ours stay float32, and their router multiplies in bfloat16, ours in float32
FP32_ATOL, BF16_ATOL = 1e-5, 0.05


def _logits(path: Path, dtype: torch.dtype) -> torch.Tensor:
    model = load_model(path, dtype=dtype)
    ids = torch.tensor([FIXTURE["logits_canvas"]])
    with torch.inference_mode():
        return model.net(ids, torch.arange(ids.shape[1])[None])[0].float()


def test_the_fixture_cites_its_sources():
    src = FIXTURE["source"]
    assert (src["network"]["repo"], src["network"]["function"]) == ("ZHZisZZ/dllm", "LLaDAMoEModelLM")
    assert (src["loop"]["repo"], src["loop"]["function"]) == ("yjyddq/DARE", "generate")
    assert all(len(s["commit"]) == 40 and len(s["sha256"]) == 64 for s in src.values())


def test_the_real_config_keys_load_as_llada_moe_by_keys_alone(tmp_path):
    config = read_config(TINY)
    assert config["model_type"] == "llada"  # as the real checkpoint's config.json says
    assert detect_architecture(config).name == "llada_moe"
    assert detect_architecture({k: v for k, v in config.items() if k != "architectures"}).name == "llada_moe"
    dense = read_config(SHIPPED_CONFIGS / "models" / "tiny-llada")
    assert detect_architecture({k: v for k, v in dense.items() if k != "architectures"}).name == "llada"
    model = load_model(TINY)
    assert (model.mask_id, model.pad_id) == (FIXTURE["mask_id"], config["pad_token_id"])
    assert model.tokenizer.encode(FIXTURE["texts"][0], add_special_tokens=False) == FIXTURE["prompt_ids"][0]


def test_logits_equal_the_authors_network_in_float32_and_bfloat16():
    assert torch.allclose(_logits(TINY, torch.float32), OFFICIAL["tiny_fp32"], atol=FP32_ATOL, rtol=0)
    assert torch.allclose(_logits(TINY, torch.bfloat16), OFFICIAL["tiny_bf16"], atol=BF16_ATOL, rtol=0)


def test_dense_layer_selection_bias_shared_expert_and_partial_rope_equal_the_authors(tmp_path):
    """The variant exercises every branch of their block: a dense layer (moe_layer_freq 0), the expert bias that
    moves the top-k and stays in the weights (no renormalisation), a shared expert, GQA and a partial rotary."""
    path = write_tiny_checkpoint("llada_moe", tmp_path / "variant", seed=1, config_overrides=VARIANT)
    assert read_config(path) == FIXTURE["variant_config"]
    ours = _logits(path, torch.float32)
    assert torch.allclose(ours, OFFICIAL["variant_fp32"], atol=FP32_ATOL, rtol=0)


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"gen{c['gen_length']}-steps{c['steps']}")
def test_low_confidence_tokens_and_nfe_equal_the_reference_loop(case):
    model = load_model(TINY, dtype=torch.float32)
    for ids, tokens, nfe in zip(FIXTURE["prompt_ids"], case["tokens"], case["nfe"], strict=True):
        assert llada_cases.low_confidence(model, ids, case) == (tokens, nfe)


def test_dual_cache_tokens_and_nfe_equal_the_reference_systems_cached_loop():
    """yjyddq/DARE's ``generate_with_dual_cache`` (tests/backends/fixtures/llada_moe_dual_official.json): their loop
    over our network behind their model interface, since the authors' network runs no cache."""
    dual = json.loads((FIXTURES / "llada_moe_dual_official.json").read_text())
    assert (dual["source"]["repo"], dual["source"]["function"]) == ("yjyddq/DARE", "generate_with_dual_cache")
    engine = FastDllmEngine(EngineContext(model_name="tiny-llada-moe", model_spec=config.model("tiny-llada-moe"),
                                          device="cpu"))
    requests = [GenerationRequest(sample_id=str(i), index=0, messages=(Message(role="user", content=q),), seed=0)
                for i, q in enumerate(dual["questions"])]
    assert [engine.prompt_ids(r.messages) for r in requests] == dual["prompt_ids"]
    out = engine.generate(requests, DecodingConfig(**dual["decoding"], cache="dual", batch_size=len(requests)))
    assert [g.token_ids for g in out] == dual["tokens"]
    # their returned count adds one per block to the forwards it ran (it counts a block's first commit as a pass)
    assert [g.nfe for g in out] == dual["forwards"] == [n - 2 for n in dual["nfe"]]


def test_the_real_shape_has_the_published_7b_total_and_1_4b_active_parameters():
    """inclusionAI's model card: 7B parameters, 1.4B active. The shape (benchmarks/gpu_decode.py LLADA_MOE_7B: 16
    layers, hidden 2048, 64 experts of width 1024, top-8, 157,184 rows) gives 7.36B in all and 1.40B per token
    (attention, 8 experts, the router and the LM head; the input embedding is a lookup)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import gpu_decode

    args = detect_architecture(gpu_decode.LLADA_MOE_7B).build_args(gpu_decode.LLADA_MOE_7B)
    with torch.device("meta"):
        net = DiffusionTransformer(args)
    total = sum(p.numel() for p in net.parameters())
    experts = sum(p.numel() for n, p in net.named_parameters() if ".experts_" in n)
    active = total - net.embed.weight.numel() - experts * (1 - args.num_experts_per_tok / args.num_experts)
    assert round(total / 1e9, 2) == 7.36 and round(active / 1e9, 2) == 1.40
