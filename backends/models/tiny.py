"""Tiny random checkpoints of every architecture, laid out exactly like the hub checkpoints.

``write_tiny_checkpoint("sdar", dir)`` writes config.json (the real keys, tiny values), weights under the
official tensor names (sharded with an index where the real checkpoint is sharded), a byte-level BPE
tokenizer.json with the family's special tokens, and tokenizer_config.json with a chat template of the
family's format and the mask token. Used by tests, benchmarks and anyone needing a model in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from dare.harness.config import SHIPPED_CONFIGS
from dare.harness.registry import architectures

from .checkpoint import save_state
from .transformer import DiffusionTransformer

TINY_VOCAB = 288  # 256 byte tokens + specials + spare rows, like real checkpoints' padded embeddings
MODEL_TEMPLATES = SHIPPED_CONFIGS / "models" / "templates"  # chat templates of models whose authors set their own

_LLAMA3_TEMPLATE = (
    "{% for m in messages %}{% if loop.first %}{{ bos_token }}{% endif %}"
    "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}")
_CHATML_TEMPLATE = (
    "{% if default_system and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\n' + default_system + '<|im_end|>\\n' }}{% endif %}"
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
_LING_TEMPLATE = (
    "{{ '<role>SYSTEM</role>' }}{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n' }}{% endif %}"
    "{{ 'detailed thinking off<|role_end|>' }}"
    "{% for m in messages %}{% if m['role'] == 'user' %}{{ '<role>HUMAN</role>' + m['content'] + '<|role_end|>' }}"
    "{% elif m['role'] == 'assistant' %}{{ '<role>ASSISTANT</role>' + m['content'] + '<|role_end|>' }}"
    "{% elif not loop.first %}{{ '<role>SYSTEM</role>' + m['content'] + '<|role_end|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<role>ASSISTANT</role>' }}{% endif %}")

# the Ling tokenizer layout of inclusionAI's LLaDA2.x and LLaDA-MoE
_LING_TOKENIZER: dict[str, Any] = dict(
    specials=["<|startoftext|>", "<|endoftext|>", "<role>", "</role>", "<|role_end|>", "<|mask|>"],
    roles=dict(bos_token="<|startoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>",
               mask_token="<|mask|>"),
    template=_LING_TEMPLATE, shards=2)

# per family: special tokens in id order (from 256), tokenizer_config roles, template, config.json keys
_FAMILIES: dict[str, dict[str, Any]] = {
    "llada": dict(
        specials=["<|startoftext|>", "<|endoftext|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
                  "<|mdm_mask|>"],
        roles=dict(bos_token="<|startoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>"),
        template=_LLAMA3_TEMPLATE, shards=2,
        config=lambda ids: {
            "architectures": ["LLaDAModelLM"], "model_type": "llada", "activation_type": "silu", "alibi": False,
            "attention_layer_norm": False, "block_type": "llama", "d_model": 64, "n_heads": 4, "n_kv_heads": 4,
            "n_layers": 2, "mlp_hidden_size": 128, "mlp_ratio": 4, "vocab_size": TINY_VOCAB,
            "embedding_size": TINY_VOCAB, "max_sequence_length": 4096, "rope": True, "rope_theta": 500000.0,
            "rope_full_precision": True, "layer_norm_type": "rms", "rms_norm_eps": 1e-5, "include_bias": False,
            "include_qkv_bias": False, "weight_tying": False, "scale_logits": False, "flash_attention": False,
            "mask_token_id": ids["<|mdm_mask|>"], "eos_token_id": ids["<|endoftext|>"],
            "pad_token_id": ids["<|endoftext|>"], "torch_dtype": "float32"}),
    "dream": dict(
        specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|beginoftext|>", "<|mask|>"],
        roles=dict(bos_token="<|beginoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                   mask_token="<|mask|>"),
        template=_CHATML_TEMPLATE.replace("default_system", "'You are a helpful assistant.'"), shards=2,
        config=lambda ids: {
            "architectures": ["DreamModel"], "model_type": "Dream", "hidden_act": "silu", "hidden_size": 64,
            "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
            "vocab_size": TINY_VOCAB, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
            "max_position_embeddings": 4096, "tie_word_embeddings": False, "use_sliding_window": False,
            "mask_token_id": ids["<|mask|>"], "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|endoftext|>"], "pad_token_id": ids["<|endoftext|>"], "torch_dtype": "float32"}),
    "sdar": dict(
        specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|MASK|>"],
        roles=dict(eos_token="<|endoftext|>", pad_token="<|endoftext|>", mask_token="<|MASK|>"),
        template=_CHATML_TEMPLATE.replace("default_system", "''"), shards=1,
        config=lambda ids: {
            "architectures": ["SDARForCausalLM"], "model_type": "sdar", "attention_bias": False, "hidden_act": "silu",
            "hidden_size": 64, "head_dim": 32, "intermediate_size": 128, "num_attention_heads": 4,
            "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": TINY_VOCAB, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000, "max_position_embeddings": 4096, "tie_word_embeddings": False, "block_size": 4,
            "mask_token_id": ids["<|MASK|>"], "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|endoftext|>"], "torch_dtype": "float32"}),
    "llada2_moe": dict(
        **_LING_TOKENIZER,
        config=lambda ids: {
            "architectures": ["LLaDA2MoeModelLM"], "model_type": "llada2_moe", "hidden_size": 64, "head_dim": 16,
            "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 3, "intermediate_size": 128,
            "partial_rotary_factor": 0.5, "rotary_dim": 8, "rope_theta": 600000, "rms_norm_eps": 1e-6,
            "use_qk_norm": True, "use_qkv_bias": False, "use_bias": False, "first_k_dense_replace": 1,
            "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2, "num_shared_experts": 1,
            "n_group": 4, "topk_group": 2, "score_function": "sigmoid", "moe_router_enable_expert_bias": True,
            "routed_scaling_factor": 2.5, "norm_topk_prob": True, "vocab_size": TINY_VOCAB,
            "pad_token_id": ids["<|endoftext|>"], "tie_word_embeddings": False, "torch_dtype": "float32"}),
}
_FAMILIES["sdar_moe"] = dict(_FAMILIES["sdar"], shards=2, config=lambda ids: {
    **{k: v for k, v in _FAMILIES["sdar"]["config"](ids).items() if k not in ("mask_token_id", "block_size")},
    "architectures": ["SDARMoeForCausalLM"], "model_type": "sdar_moe", "num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": []})
# LLaDA-MoE-7B-A1B's keys (model_type "llada", like the dense model's) at tiny sizes; the Ling tokenizer family
_FAMILIES["llada_moe"] = dict(
    **_LING_TOKENIZER,
    config=lambda ids: {
        "architectures": ["LLaDAMoEModelLM"], "model_type": "llada", "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 4, "num_hidden_layers": 2, "dense_intermediate_size": 128,
        "expert_intermediate_size": 32, "shared_expert_intermediate_size": None, "num_experts": 8,
        "num_experts_per_tok": 2, "moe_layer_freq": [1, 1], "moe_router_enable_expert_bias": False,
        "moe_router_score_function": "softmax", "norm_topk_prob": False, "qk_layernorm": True,
        "partial_rotary_factor": 1, "rope_theta": 50000, "rope_scaling": None, "rms_norm_eps": 1e-5,
        "attention_bias": False, "attention_dropout": 0.0, "clip_qkv": None, "hidden_act": "silu",
        "max_position_embeddings": 4096, "vocab_size": TINY_VOCAB, "router_aux_loss_coef": 0.01,
        "output_router_logits": False, "use_cache": False, "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"], "tie_word_embeddings": False, "torch_dtype": "float32"})
# MMaDA: LLaDA's keys and tokenizer under model_type "mmada", plus its multimodal keys (no image rows at tiny size)
_FAMILIES["mmada"] = dict(_FAMILIES["llada"], template=(MODEL_TEMPLATES / "mmada.jinja").read_text(),
                          config=lambda ids: {
    **_FAMILIES["llada"]["config"](ids), "architectures": ["MMadaModelLM"], "model_type": "mmada",
    "llm_vocab_size": TINY_VOCAB, "new_vocab_size": TINY_VOCAB, "codebook_size": 0, "num_vq_tokens": 0,
    "num_new_special_tokens": 0,
    # the rest of LLaDA-8B-Instruct's config.json, which MMaDA's LLaDAModelLM reads (init on CPU, not meta, when tiny)
    "alibi_bias_max": 8.0, "attention_dropout": 0.0, "attention_layer_norm_with_affine": True,
    "bias_for_layer_norm": False, "block_group_size": 1, "embedding_dropout": 0.0, "init_cutoff_factor": None,
    "init_device": "cpu", "init_fn": "mitchell", "init_std": 0.02, "input_emb_norm": False,
    "layer_norm_with_affine": True, "multi_query_attention": None, "precision": "amp_bf16", "residual_dropout": 0.0,
    "use_cache": False})
ARCHITECTURES = tuple(_FAMILIES)


def _byte_alphabet() -> list[str]:
    """The byte -> printable-character table of byte-level BPE, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + extra))
            extra += 1
    return out


def write_tokenizer(directory: Path, specials: list[str], roles: dict[str, str], template: str) -> dict[str, int]:
    """Byte-level BPE tokenizer.json (256 byte tokens, no merges) + tokenizer_config.json; returns special ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {ch: i for i, ch in enumerate(_byte_alphabet())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.save(str(directory / "tokenizer.json"))
    _write_tokenizer_config(directory, roles, template)
    return {s: tok.token_to_id(s) for s in specials}


def _write_tokenizer_config(directory: Path, roles: dict[str, str], template: str) -> None:
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": False, "add_eos_token": False,
              "clean_up_tokenization_spaces": False, "model_max_length": 4096, **roles, "chat_template": template}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2))


def train_tokenizer(directory: Path, specials: list[str], roles: dict[str, str], template: str,
                    corpus: Iterable[str], vocab_size: int) -> tuple[dict[str, int], int]:
    """A byte-level BPE trained on ``corpus`` (digits kept one per token, merges free to cross spaces, so a
    prompt template repeated in every row compresses to a few dozen tokens) + tokenizer_config.json.

    Returns the special ids and the embedding rows: the vocabulary rounded up to a multiple of 64, like the
    padded embeddings of real checkpoints."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.save(str(directory / "tokenizer.json"))
    _write_tokenizer_config(directory, roles, template)
    return {s: tok.token_to_id(s) for s in specials}, -(-tok.get_vocab_size() // 64) * 64


def write_tiny_checkpoint(arch_name: str, directory: str | Path, seed: int = 0, std: float = 0.1,
                          config_overrides: dict[str, Any] | None = None,
                          dtype: torch.dtype = torch.float32, tokenizer_corpus: Iterable[str] | None = None,
                          tokenizer_vocab: int = 1024) -> Path:
    """Write a tiny random checkpoint of ``arch_name`` (one of :data:`ARCHITECTURES`) into ``directory``.

    With ``tokenizer_corpus`` the tokenizer is a BPE of at most ``tokenizer_vocab`` tokens trained on it
    (see :func:`train_tokenizer`) instead of the bare byte-level one."""
    family = _FAMILIES[arch_name]
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    vocab = {}
    if tokenizer_corpus is None:
        ids = write_tokenizer(directory, family["specials"], family["roles"], family["template"])
    else:
        ids, rows = train_tokenizer(directory, family["specials"], family["roles"], family["template"],
                                    tokenizer_corpus, tokenizer_vocab)
        vocab = {key: rows for key in ("vocab_size", "embedding_size") if key in family["config"](ids)}
    config = {**family["config"](ids), **vocab, "torch_dtype": str(dtype).removeprefix("torch."),
              **(config_overrides or {})}
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    arch = architectures.get(arch_name)
    net = DiffusionTransformer(arch.build_args(config))
    net.init_random(torch.Generator().manual_seed(seed), std=std)
    save_state(net.to(dtype), arch, directory, shards=family["shards"])
    return directory


# the random tiny models shipped with the package (configs/models/tiny-*.yaml): name -> architecture.
# tiny-llada and tiny-sdar are trained instead (see dare.backends.models.tiny_planning).
SHIPPED = {"tiny-dream": "dream", "tiny-sdar-moe": "sdar_moe", "tiny-llada2": "llada2_moe",
           "tiny-llada-moe": "llada_moe", "tiny-mmada": "mmada"}


def write_shipped(root: Path) -> list[Path]:
    """(Re)write the shipped random tiny checkpoints under ``root`` (configs/models): bf16, seed 0."""
    return [write_tiny_checkpoint(arch, root / name, seed=0, dtype=torch.bfloat16) for name, arch in SHIPPED.items()]


if __name__ == "__main__":  # python -m dare.backends.models.tiny configs/models
    import sys

    from dare.harness.cliutil import emit

    for written in write_shipped(Path(sys.argv[1] if len(sys.argv) > 1 else "configs/models")):
        emit(written)
