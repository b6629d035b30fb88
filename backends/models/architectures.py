"""The seven supported checkpoint layouts: config.json -> ModelArgs, and internal -> official tensor names.

Each :class:`Architecture` is registered (lazily, see ``__init__``) in ``dare.harness.registry.architectures``
under its short name and under the names a checkpoint's config.json uses (``architectures[0]``,
``model_type``), so detection is a registry lookup. Tensor-name tables map the internal parameter name
with ``{i}`` (layer) and ``{e}`` (expert) placeholders to the official safetensors name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from dare.harness.errors import ModelError

from .transformer import ModelArgs


@dataclass(frozen=True)
class Architecture:
    """What the loader and the decoders need to know about one checkpoint family."""

    name: str
    config_names: tuple[str, ...]  # config.json architectures[0] / model_type values
    build_args: Callable[[dict[str, Any]], ModelArgs]
    tensor_names: dict[str, str]
    attention: str  # "bidirectional" or "block_causal"
    decoding_family: str  # decoder namespace: "mdm", "dream" or "block"
    shift_logits: bool = False  # Dream: distribution for position i is the output at i - 1
    mask_id: int | None = None  # fallbacks when config.json lacks them (spec section 6.1)
    stop_texts: tuple[str, ...] = ()  # end-of-turn tokens that end an answer besides EOS
    block_size: int | None = None
    filtered_confidence: bool = False  # LLaDA2: confidence under the top-k/top-p filtered distribution
    decoding_defaults: dict[str, Any] = field(default_factory=dict)  # used when no ModelSpec is given
    # config.json keys that tell this layout apart from another family's under the same model_type
    layout_keys: tuple[str, ...] = ()
    notes: dict[str, Any] = field(default_factory=dict)


def _need(cfg: dict[str, Any], *keys: str) -> list[Any]:
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise ModelError(f"config.json lacks {', '.join(missing)}; is this a complete checkpoint config?")
    return [cfg[k] for k in keys]


def _llada_args(cfg: dict[str, Any]) -> ModelArgs:
    d, heads, layers = _need(cfg, "d_model", "n_heads", "n_layers")
    unsupported = [k for k in ("alibi", "weight_tying", "include_qkv_bias", "attention_layer_norm", "scale_logits")
                   if cfg.get(k)]
    if unsupported or cfg.get("block_type", "llama") != "llama":
        raise ModelError(f"LLaDA config uses unsupported options {unsupported or [cfg.get('block_type')]}; "
                         "only the llama block layout of LLaDA-8B is implemented")
    kv = cfg.get("n_kv_heads") or heads
    return ModelArgs(
        vocab_size=cfg.get("embedding_size") or cfg["vocab_size"], hidden_size=d, n_layers=layers, n_heads=heads,
        n_kv_heads=kv, head_dim=d // heads, intermediate_size=cfg.get("mlp_hidden_size") or cfg.get("mlp_ratio", 4) * d,
        norm_eps=cfg.get("rms_norm_eps", 1e-5), rope_theta=cfg.get("rope_theta", 10000.0), rotary_dim=d // heads)


def _qwen_args(cfg: dict[str, Any], *, qkv_bias: bool, qk_norm: bool) -> ModelArgs:
    h, heads, layers, inter = _need(cfg, "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size")
    head_dim = cfg.get("head_dim") or h // heads
    moe: dict[str, Any] = {}
    if cfg.get("num_experts"):
        step, dense = cfg.get("decoder_sparse_step", 1), set(cfg.get("mlp_only_layers") or [])
        moe = dict(moe_layers=tuple(i for i in range(layers) if i not in dense and (i + 1) % step == 0),
                   num_experts=cfg["num_experts"], num_experts_per_tok=cfg["num_experts_per_tok"],
                   moe_intermediate_size=cfg["moe_intermediate_size"], norm_topk_prob=cfg.get("norm_topk_prob", True))
    return ModelArgs(
        vocab_size=cfg["vocab_size"], hidden_size=h, n_layers=layers, n_heads=heads,
        n_kv_heads=cfg.get("num_key_value_heads") or heads, head_dim=head_dim, intermediate_size=inter,
        norm_eps=cfg.get("rms_norm_eps", 1e-6), rope_theta=cfg.get("rope_theta", 10000.0), rotary_dim=head_dim,
        qkv_bias=qkv_bias, qk_norm=qk_norm, **moe)


def _llada2_args(cfg: dict[str, Any]) -> ModelArgs:
    h, heads, layers, inter = _need(cfg, "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size")
    head_dim = cfg.get("head_dim") or h // heads
    if cfg.get("score_function", "sigmoid") != "sigmoid":
        raise ModelError(f"LLaDA2 router score_function {cfg['score_function']!r} is not supported (only sigmoid)")
    rotary = cfg.get("rotary_dim") or int(head_dim * cfg.get("partial_rotary_factor", 1.0))
    first_dense = cfg.get("first_k_dense_replace", 0)
    return ModelArgs(
        vocab_size=cfg["vocab_size"], hidden_size=h, n_layers=layers, n_heads=heads,
        n_kv_heads=cfg.get("num_key_value_heads") or heads, head_dim=head_dim, intermediate_size=inter,
        norm_eps=cfg.get("rms_norm_eps", 1e-6), rope_theta=cfg.get("rope_theta", 10000.0), rotary_dim=rotary,
        qkv_bias=bool(cfg.get("use_qkv_bias")), qk_norm=bool(cfg.get("use_qk_norm", True)), fused_qkv=True,
        moe_layers=tuple(range(first_dense, layers)) if cfg.get("num_experts") else (),
        num_experts=cfg.get("num_experts", 0), num_experts_per_tok=cfg.get("num_experts_per_tok", 0),
        moe_intermediate_size=cfg.get("moe_intermediate_size", 0), num_shared_experts=cfg.get("num_shared_experts", 0),
        router="sigmoid_group", n_group=cfg.get("n_group", 1), topk_group=cfg.get("topk_group", 1),
        routed_scaling_factor=cfg.get("routed_scaling_factor", 1.0))


def _llada_moe_args(cfg: dict[str, Any]) -> ModelArgs:
    h, heads, layers, experts, width = _need(cfg, "hidden_size", "num_attention_heads", "num_hidden_layers",
                                             "num_experts", "expert_intermediate_size")
    unsupported = [k for k in ("attention_bias", "clip_qkv", "rope_scaling") if cfg.get(k)]
    if cfg.get("moe_router_score_function") not in (None, "softmax"):
        unsupported.append(f"moe_router_score_function={cfg['moe_router_score_function']}")
    if unsupported:
        raise ModelError(f"LLaDA-MoE config uses unsupported options {unsupported}; only the layout of "
                         "LLaDA-MoE-7B-A1B (softmax router, no attention bias, plain RoPE) is implemented")
    head_dim = h // heads
    freq = cfg.get("moe_layer_freq") or [1] * layers
    return ModelArgs(
        vocab_size=cfg["vocab_size"], hidden_size=h, n_layers=layers, n_heads=heads,
        n_kv_heads=cfg.get("num_key_value_heads") or heads, head_dim=head_dim,
        intermediate_size=cfg.get("dense_intermediate_size") or 0, norm_eps=cfg.get("rms_norm_eps", 1e-5),
        rope_theta=cfg.get("rope_theta", 10000.0), rotary_dim=int(head_dim * cfg.get("partial_rotary_factor", 1.0)),
        qk_norm=bool(cfg.get("qk_layernorm")), moe_layers=tuple(i for i, f in enumerate(freq) if f),
        num_experts=experts, num_experts_per_tok=cfg["num_experts_per_tok"], moe_intermediate_size=width,
        # the authors' block fixes norm_topk_prob to False whatever config.json says (modeling_lladamoe.py)
        norm_topk_prob=False, router_bias=bool(cfg.get("moe_router_enable_expert_bias")),
        shared_intermediate_size=cfg.get("shared_expert_intermediate_size") or 0)


_LLADA_NAMES = {
    "embed.weight": "model.transformer.wte.weight",
    "layers.{i}.attn_norm.weight": "model.transformer.blocks.{i}.attn_norm.weight",
    "layers.{i}.attn.q.weight": "model.transformer.blocks.{i}.q_proj.weight",
    "layers.{i}.attn.k.weight": "model.transformer.blocks.{i}.k_proj.weight",
    "layers.{i}.attn.v.weight": "model.transformer.blocks.{i}.v_proj.weight",
    "layers.{i}.attn.o.weight": "model.transformer.blocks.{i}.attn_out.weight",
    "layers.{i}.mlp_norm.weight": "model.transformer.blocks.{i}.ff_norm.weight",
    "layers.{i}.mlp.gate.weight": "model.transformer.blocks.{i}.ff_proj.weight",
    "layers.{i}.mlp.up.weight": "model.transformer.blocks.{i}.up_proj.weight",
    "layers.{i}.mlp.down.weight": "model.transformer.blocks.{i}.ff_out.weight",
    "norm.weight": "model.transformer.ln_f.weight",
    "lm_head.weight": "model.transformer.ff_out.weight",
}

_QWEN_NAMES = {
    "embed.weight": "model.embed_tokens.weight",
    "layers.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    **{f"layers.{{i}}.attn.{p}.{t}": f"model.layers.{{i}}.self_attn.{p}_proj.{t}"
       for p in "qkvo" for t in ("weight", "bias")},
    "layers.{i}.attn.q_norm.weight": "model.layers.{i}.self_attn.q_norm.weight",
    "layers.{i}.attn.k_norm.weight": "model.layers.{i}.self_attn.k_norm.weight",
    "layers.{i}.mlp_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    **{f"layers.{{i}}.mlp.{p}.weight": f"model.layers.{{i}}.mlp.{p}_proj.weight" for p in ("gate", "up", "down")},
    "layers.{i}.mlp.router.weight": "model.layers.{i}.mlp.gate.weight",
    **{f"layers.{{i}}.mlp.experts_{p}": f"model.layers.{{i}}.mlp.experts.{{e}}.{p}_proj.weight"
       for p in ("gate", "up", "down")},
    "norm.weight": "model.norm.weight",
    "lm_head.weight": "lm_head.weight",
}

_LLADA2_NAMES = {
    "embed.weight": "model.word_embeddings.weight",
    "layers.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    "layers.{i}.attn.qkv.weight": "model.layers.{i}.attention.query_key_value.weight",
    "layers.{i}.attn.qkv.bias": "model.layers.{i}.attention.query_key_value.bias",
    "layers.{i}.attn.q_norm.weight": "model.layers.{i}.attention.query_layernorm.weight",
    "layers.{i}.attn.k_norm.weight": "model.layers.{i}.attention.key_layernorm.weight",
    "layers.{i}.attn.o.weight": "model.layers.{i}.attention.dense.weight",
    "layers.{i}.mlp_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    **{f"layers.{{i}}.mlp.{p}.weight": f"model.layers.{{i}}.mlp.{p}_proj.weight" for p in ("gate", "up", "down")},
    "layers.{i}.mlp.router.weight": "model.layers.{i}.mlp.gate.weight",
    "layers.{i}.mlp.expert_bias": "model.layers.{i}.mlp.gate.expert_bias",
    **{f"layers.{{i}}.mlp.experts_{p}": f"model.layers.{{i}}.mlp.experts.{{e}}.{p}_proj.weight"
       for p in ("gate", "up", "down")},
    **{f"layers.{{i}}.mlp.shared.{p}.weight": f"model.layers.{{i}}.mlp.shared_experts.{p}_proj.weight"
       for p in ("gate", "up", "down")},
    "norm.weight": "model.norm.weight",
    "lm_head.weight": "lm_head.weight",
}

# inclusionAI's LLaDA-MoE (modeling_lladamoe.py): Qwen-style names, a per-layer shared expert beside the MoE block
_LLADA_MOE_NAMES = {
    **_QWEN_NAMES,
    "layers.{i}.mlp.expert_bias": "model.layers.{i}.mlp.expert_bias",
    **{f"layers.{{i}}.mlp.shared.{p}.weight": f"model.layers.{{i}}.shared_expert.{p}_proj.weight"
       for p in ("gate", "up", "down")},
}

LLADA = Architecture(
    name="llada", config_names=("LLaDAModelLM", "llada"), build_args=_llada_args, tensor_names=_LLADA_NAMES,
    attention="bidirectional", decoding_family="mdm", mask_id=126336, stop_texts=("<|eot_id|>",),
    layout_keys=("d_model",))
# MMaDA (Gen-Verse/MMaDA models/modeling_mmada.py: MMadaModelLM(LLaDAModelLM)): LLaDA's network and tensor names
# under its own config names, the vocabulary extended by image tokens; its text path is LLaDA's
MMADA = replace(LLADA, name="mmada", config_names=("MMadaModelLM", "mmada"))
# the real config.json says model_type "llada" (the dense model's); its keys tell the MoE layout apart
LLADA_MOE = Architecture(
    name="llada_moe", config_names=("LLaDAMoEModelLM", "lladamoe", "llada"), build_args=_llada_moe_args,
    tensor_names=_LLADA_MOE_NAMES, attention="bidirectional", decoding_family="mdm", mask_id=156895,
    stop_texts=("<|role_end|>",), layout_keys=("num_experts", "expert_intermediate_size"))
DREAM = Architecture(
    name="dream", config_names=("DreamModel", "Dream"), tensor_names=_QWEN_NAMES,
    build_args=lambda cfg: _qwen_args(cfg, qkv_bias=True, qk_norm=False),
    attention="bidirectional", decoding_family="dream", shift_logits=True, mask_id=151666, stop_texts=("<|im_end|>",),
    decoding_defaults={"block_length": 256, "remasking": "entropy"})
SDAR = Architecture(
    name="sdar", config_names=("SDARForCausalLM", "sdar"), tensor_names=_QWEN_NAMES,
    build_args=lambda cfg: _qwen_args(cfg, qkv_bias=bool(cfg.get("attention_bias")), qk_norm=True),
    attention="block_causal", decoding_family="block", mask_id=151669, stop_texts=("<|im_end|>",), block_size=4,
    decoding_defaults={"block_length": 4, "remasking": "low_confidence_dynamic", "threshold": 0.95})
SDAR_MOE = Architecture(
    name="sdar_moe", config_names=("SDARMoeForCausalLM", "sdar_moe"), tensor_names=_QWEN_NAMES,
    build_args=lambda cfg: _qwen_args(cfg, qkv_bias=bool(cfg.get("attention_bias")), qk_norm=True),
    attention="block_causal", decoding_family="block", mask_id=151669, stop_texts=("<|im_end|>",), block_size=4,
    decoding_defaults={"block_length": 4, "remasking": "low_confidence_dynamic", "threshold": 0.95})
LLADA2_MOE = Architecture(
    name="llada2_moe", config_names=("LLaDA2MoeModelLM", "llada2_moe"), build_args=_llada2_args,
    tensor_names=_LLADA2_NAMES, attention="block_causal", decoding_family="block", mask_id=156895,
    stop_texts=("<|role_end|>",), block_size=32, filtered_confidence=True,
    decoding_defaults={"block_length": 32, "remasking": "low_confidence", "threshold": 0.95})

ALL = (LLADA, LLADA_MOE, MMADA, DREAM, SDAR, SDAR_MOE, LLADA2_MOE)
