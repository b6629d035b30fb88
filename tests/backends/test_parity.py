"""Weight-mapping parity: our loaders + networks vs transformers' Llama / Qwen2 / Qwen3 on the same weights,
and the MoE routers vs a straightforward per-token reference."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from dare.backends.models.loader import load_model
from dare.backends.models.tiny import write_tiny_checkpoint

transformers = pytest.importorskip("transformers")

LLADA_TO_LLAMA = {
    "model.transformer.wte.": "model.embed_tokens.", "model.transformer.ln_f.": "model.norm.",
    "model.transformer.ff_out.": "lm_head.", ".attn_norm.": ".input_layernorm.",
    ".ff_norm.": ".post_attention_layernorm.",
    ".q_proj.": ".self_attn.q_proj.", ".k_proj.": ".self_attn.k_proj.", ".v_proj.": ".self_attn.v_proj.",
    ".attn_out.": ".self_attn.o_proj.", ".ff_proj.": ".mlp.gate_proj.", ".up_proj.": ".mlp.up_proj.",
    ".ff_out.": ".mlp.down_proj.", "model.transformer.blocks.": "model.layers.",
}


def _all_weights(path):
    state = {}
    for f in sorted(path.glob("*.safetensors")):
        state.update(load_file(str(f)))
    return state


def _llada_as_llama(name: str) -> str:
    for old, new in LLADA_TO_LLAMA.items():
        name = name.replace(old, new)
    return name


def _reference(arch: str, path):
    cfg = json.loads((path / "config.json").read_text())
    weights = _all_weights(path)
    common = dict(vocab_size=cfg["vocab_size"], num_hidden_layers=cfg.get("num_hidden_layers", cfg.get("n_layers")),
                  tie_word_embeddings=False, attn_implementation="sdpa")
    if arch == "llada":
        hf_cfg = transformers.LlamaConfig(
            hidden_size=cfg["d_model"], num_attention_heads=cfg["n_heads"], num_key_value_heads=cfg["n_kv_heads"],
            intermediate_size=cfg["mlp_hidden_size"], rope_theta=cfg["rope_theta"], rms_norm_eps=cfg["rms_norm_eps"],
            **common)
        net, weights = transformers.LlamaForCausalLM(hf_cfg), {_llada_as_llama(k): v for k, v in weights.items()}
    else:
        keys = ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "rope_theta",
                "rms_norm_eps")
        kwargs = {k: cfg[k] for k in keys}
        if arch == "dream":
            net = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kwargs, **common))
        else:
            net = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**kwargs, head_dim=cfg["head_dim"], **common))
    missing, unexpected = net.load_state_dict(weights, strict=False)
    assert not unexpected and not [m for m in missing if "rotary" not in m], (missing, unexpected)
    return net.eval()


def _inputs(block: int | None):
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 250, (2, 13), generator=gen)
    valid = torch.ones(2, 13, dtype=torch.bool)
    valid[1, :3] = False  # left padding on row 1
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    mask = valid[:, None, None, :].expand(2, 1, 13, 13).clone()
    if block:
        blk = positions // block
        mask &= blk[:, None, None, :] <= blk[:, None, :, None]
    mask |= torch.eye(13, dtype=torch.bool)
    return ids, positions, mask


@pytest.mark.parametrize("arch,overrides,block", [
    ("llada", {}, None), ("llada", {"n_kv_heads": 2}, None), ("dream", {}, None), ("sdar", {}, 4)])
def test_logits_match_transformers(tmp_path, arch, overrides, block):
    path = write_tiny_checkpoint(arch, tmp_path / arch, config_overrides=overrides)
    ours = load_model(path)
    ref = _reference(arch, path)
    ids, positions, mask = _inputs(block)
    with torch.no_grad():
        got = ours.net(ids, positions, mask)
        want = ref(input_ids=ids, position_ids=positions, attention_mask=mask).logits
    rows = mask[:, 0].diagonal(dim1=1, dim2=2)  # compare every query (pads included: same mask both sides)
    assert rows.all()
    assert (got - want).abs().max().item() < 1e-5


def test_block_causal_mask_isolates_future_blocks(tiny_models):
    model = tiny_models["sdar"]
    ids, positions, mask = _inputs(4)
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 250
    with torch.no_grad():
        a, b = model.net(ids, positions, mask), model.net(changed, positions, mask)
    last_block = positions[0, -1] // 4
    earlier = positions[0] // 4 < last_block
    assert torch.equal(a[0, earlier], b[0, earlier]) and not torch.allclose(a[0, ~earlier], b[0, ~earlier])


def _naive_moe(moe, x, kind):
    """Per-token loop written straight from the model cards' descriptions."""
    a = moe.args
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        logits = moe.router.weight.double() @ x[t].double()
        if kind == "softmax":
            p = torch.softmax(logits, -1)
            top = sorted(range(a.num_experts), key=lambda e: -p[e])[: a.num_experts_per_tok]
            w = torch.stack([p[e] for e in top])
            w = w / w.sum()
        else:
            s = torch.sigmoid(logits)
            biased = s + moe.expert_bias.double()
            size = a.num_experts // a.n_group
            group_scores = [sorted(biased[g * size:(g + 1) * size].tolist())[-2:] for g in range(a.n_group)]
            groups = sorted(range(a.n_group), key=lambda g: -sum(group_scores[g]))[: a.topk_group]
            allowed = [e for e in range(a.num_experts) if e // size in groups]
            top = sorted(allowed, key=lambda e: -biased[e])[: a.num_experts_per_tok]
            w = torch.stack([s[e] for e in top])
            w = w / w.sum() * a.routed_scaling_factor
        for weight, e in zip(w, top, strict=True):
            h = x[t].double()
            g = torch.nn.functional.silu(moe.experts_gate[e].double() @ h) * (moe.experts_up[e].double() @ h)
            out[t] += (weight * (moe.experts_down[e].double() @ g)).float()
        if moe.shared is not None:
            out[t] += moe.shared(x[t][None])[0]
    return out


@pytest.mark.parametrize("arch,kind", [("sdar_moe", "softmax"), ("llada2_moe", "sigmoid_group")])
def test_moe_router_matches_per_token_reference(tiny_models, arch, kind):
    model = tiny_models[arch]
    moe = model.net.layers[1].mlp
    x = torch.randn(9, model.net.args.hidden_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (moe(x) - _naive_moe(moe, x, kind)).abs().max().item() < 1e-5


def test_llada2_attention_matches_naive_partial_rotary(tiny_models):
    """Fused QKV split [q heads | k heads | v heads], per-head QK-norm, RoPE on the first rotary_dim dims only,
    GQA and a block-causal mask, written out position by position."""
    model = tiny_models["llada2_moe"]
    a, attn = model.net.args, model.net.layers[0].attn
    n, block = 10, 4
    x = torch.randn(1, n, a.hidden_size, generator=torch.Generator().manual_seed(2))
    positions = torch.arange(n)[None]
    blk = positions[0] // block
    mask = (blk[None, :] <= blk[:, None])[None, None]
    from dare.backends.models.layers import rotary_cos_sin

    with torch.no_grad():
        cos, sin = rotary_cos_sin(positions, a.rotary_dim, a.rope_theta)
        got = attn(x, cos, sin, mask)[0]
        qkv = (x[0].double() @ attn.qkv.weight.double().T).view(n, a.n_heads + 2 * a.n_kv_heads, a.head_dim)

        def norm(v, w):
            return v / torch.sqrt((v * v).mean(-1, keepdim=True) + a.norm_eps) * w.double()

        def rope(v, p):
            half = a.rotary_dim // 2
            out = v.clone()
            for j in range(half):
                angle = p * a.rope_theta ** (-2 * j / a.rotary_dim)
                angle = torch.tensor(angle, dtype=torch.float64)
                c, s = torch.cos(angle), torch.sin(angle)
                out[j] = v[j] * c - v[j + half] * s
                out[j + half] = v[j + half] * c + v[j] * s
            return out

        heads = []
        for h in range(a.n_heads):
            g = h // (a.n_heads // a.n_kv_heads)
            q = [rope(norm(qkv[i, h], attn.q_norm.weight), i) for i in range(n)]
            k = [rope(norm(qkv[i, a.n_heads + g], attn.k_norm.weight), i) for i in range(n)]
            v = [qkv[i, a.n_heads + a.n_kv_heads + g] for i in range(n)]
            rows = []
            for i in range(n):
                allowed = [j for j in range(n) if blk[j] <= blk[i]]
                scores = torch.stack([q[i] @ k[j] for j in allowed]) / a.head_dim ** 0.5
                rows.append((torch.softmax(scores, 0)[:, None] * torch.stack([v[j] for j in allowed])).sum(0))
            heads.append(torch.stack(rows))
        want = torch.cat(heads, dim=-1) @ attn.o.weight.double().T
    assert (got.double() - want).abs().max().item() < 1e-5
