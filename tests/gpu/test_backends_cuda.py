"""GPU check of the torch backends: each architecture at a moderate size on CUDA in bfloat16.

Builds a random checkpoint per architecture (hidden 512, 4 layers, vocab 8192; MoE with 16 experts),
loads it on CUDA in bf16, checks its logits against the float32 CPU model, and decodes a batch with the
architecture's usual strategy through the TorchEngine. Prints tokens per second. Skips without CUDA.

    pytest tests/gpu/test_backends_cuda.py -m gpu -s
"""

from __future__ import annotations

import time

import pytest
import torch

from dare.backends.models.tiny import ARCHITECTURES, write_tiny_checkpoint

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

MODERATE = {
    "llada": {"d_model": 512, "n_heads": 8, "n_kv_heads": 8, "n_layers": 4, "mlp_hidden_size": 1408,
              "vocab_size": 8192, "embedding_size": 8192},
    "dream": {"hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 4,
              "intermediate_size": 1408, "vocab_size": 8192},
    "sdar": {"hidden_size": 512, "head_dim": 64, "num_attention_heads": 8, "num_key_value_heads": 2,
             "num_hidden_layers": 4, "intermediate_size": 1408, "vocab_size": 8192},
    "sdar_moe": {"hidden_size": 512, "head_dim": 64, "num_attention_heads": 8, "num_key_value_heads": 2,
                 "num_hidden_layers": 4, "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 256,
                 "vocab_size": 8192},
    "llada2_moe": {"hidden_size": 512, "head_dim": 64, "rotary_dim": 32, "num_attention_heads": 8,
                   "num_key_value_heads": 2, "num_hidden_layers": 4, "intermediate_size": 1408, "num_experts": 16,
                   "num_experts_per_tok": 4, "n_group": 4, "topk_group": 2, "moe_intermediate_size": 256,
                   "vocab_size": 8192},
    "llada_moe": {"hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 4,
                  "dense_intermediate_size": 1408, "expert_intermediate_size": 256, "num_experts": 16,
                  "num_experts_per_tok": 4, "moe_layer_freq": [1, 1, 1, 1], "vocab_size": 8192},
}
MODERATE["mmada"] = MODERATE["llada"]
SETTINGS = {"llada": {"block_length": 32}, "dream": {"block_length": 128, "remasking": "entropy"},
            "sdar": {"block_length": 4, "remasking": "low_confidence_dynamic", "threshold": 0.9},
            "sdar_moe": {"block_length": 4, "remasking": "low_confidence_dynamic", "threshold": 0.9},
            "llada2_moe": {"block_length": 32, "threshold": 0.95}, "llada_moe": {"block_length": 32},
            "mmada": {"block_length": 32}}


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_moderate_model_decodes_on_cuda_in_bf16(tmp_path, arch):
    from dare.backends.engines.torch import TorchEngine
    from dare.backends.models.loader import load_model
    from dare.harness.engine import EngineContext, GenerationRequest
    from dare.harness.records import DecodingConfig, Message

    path = write_tiny_checkpoint(arch, tmp_path / arch, std=0.02, config_overrides=MODERATE[arch])
    cpu = load_model(path)
    gpu = load_model(path, device="cuda")
    assert gpu.net.lm_head.weight.dtype == torch.bfloat16
    ids = torch.randint(0, 250, (2, 64), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(64).expand(2, -1)
    with torch.no_grad():
        want = cpu.net(ids, positions)
        got = gpu.net(ids.cuda(), positions.cuda()).float().cpu()
    assert torch.isfinite(got).all()
    # bf16 rounding (and, for MoE, a few near-tie routing flips) stays within a few percent of the fp32 logits;
    # measured on CPU bf16: 1.3 % (sdar), 1.9 % (sdar_moe), 4.5 % (llada2_moe), 1.0 % (llada_moe),
    # 1.3 % (mmada)
    assert ((got - want).norm() / want.norm()).item() < 0.1

    engine = TorchEngine(EngineContext(model_name=arch, model_path=path, device="cuda"))
    requests = [GenerationRequest(sample_id=f"q{i}", index=0, seed=i, messages=(Message(role="user", content=f"Q{i}"),))
                for i in range(8)]
    cfg = DecodingConfig(gen_length=128, steps=128, batch_size=8, **SETTINGS[arch])
    engine.generate(requests[:1], cfg)  # warm-up (kernels, allocator)
    torch.cuda.synchronize()
    start = time.perf_counter()
    outputs = engine.generate(requests, cfg)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    assert len(outputs) == 8 and all(len(g.token_ids) == 128 for g in outputs)
    assert all(engine.model.mask_id not in g.token_ids for g in outputs)
    tokens = sum(len(g.token_ids) for g in outputs)
    print(f"{arch}: {tokens / seconds:.0f} tok/s, NFE/token {sum(g.nfe for g in outputs) / tokens:.3f}")
