"""The real checkpoints' metadata (config.json, safetensors index, tokenizer files; no weights): our
architectures must produce exactly the official tensor names and byte sizes, and the special ids."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from dare.backends.models.checkpoint import official_names
from dare.backends.models.loader import detect_architecture, resolve_special_ids
from dare.backends.models.tokenizer import load_tokenizer, render_prompt
from dare.backends.models.transformer import DiffusionTransformer

# The project's shared reference folder sits beside the checkout (as in CI); DARE_HUB_CONFIGS overrides.
HUB = Path(os.environ.get("DARE_HUB_CONFIGS") or Path(__file__).resolve().parents[3] / "shared" / "hub_configs")
pytestmark = pytest.mark.skipif(not HUB.is_dir(), reason="hub checkpoint metadata not available here")
INDEXED = ["LLaDA-8B-Instruct", "Dream-v0-Instruct-7B", "SDAR-4B-Chat", "SDAR-8B-Chat", "SDAR-30B-A3B-Chat",
           "LLaDA2.0-mini", "LLaDA2.1-mini"]


@pytest.mark.parametrize("name", INDEXED)
def test_official_names_and_sizes_match_the_index(name):
    config = json.loads((HUB / name / "config.json").read_text())
    index = json.loads((HUB / name / "model.safetensors.index.json").read_text())
    arch = detect_architecture(config)
    with torch.device("meta"):
        net = DiffusionTransformer(arch.build_args(config))
    names, n_bytes = set(), 0
    for internal, tensor in net.state_dict().items():
        names.update(official_names(arch, internal, net.args.num_experts))
        n_bytes += tensor.numel() * 2  # bf16 checkpoints
    assert names == set(index["weight_map"])
    # LLaDA2.1 stores gate.expert_bias in float32 (2 more bytes per element than bf16)
    fp32_bias = sum(t.numel() * 2 for k, t in net.state_dict().items() if k.endswith("expert_bias"))
    assert index["metadata"]["total_size"] in (n_bytes, n_bytes + fp32_bias)


@pytest.mark.parametrize("name,mask,eos,stops,start", [
    ("Dream-v0-Instruct-7B", 151666, 151643, (151643, 151645), "<|im_start|>system\nYou are a helpful assistant."),
    ("SDAR-8B-Chat", 151669, 151643, (151643, 151645), "<|im_start|>user\n")])
def test_real_tokenizers_give_the_documented_special_ids(name, mask, eos, stops, start):
    config = json.loads((HUB / name / "config.json").read_text())
    tok = load_tokenizer(HUB / name)
    got = resolve_special_ids(detect_architecture(config), config, tok, config["vocab_size"])
    assert got == (mask, eos, eos, stops)
    prompt = render_prompt(tok, [{"role": "user", "content": "2+2?"}], use_template=True)
    assert prompt.startswith(start) and prompt.endswith("<|im_start|>assistant\n")
    assert tok(prompt, add_special_tokens=False)["input_ids"][-3] == 151644
