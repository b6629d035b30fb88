"""One pre-norm decoder stack that every supported dLLM instantiates with its own :class:`ModelArgs`.

The interface decoders talk to is :meth:`DiffusionTransformer.forward`:
``forward(input_ids (B, L), positions (B, L), mask (B, 1, L, K) bool | None, cache | None) -> logits (B, L, V)``;
``inputs_embeds`` (B, L, H) in place of ``input_ids`` feeds vectors that are not rows of the embedding (ReMix's
soft inputs).
``mask`` True means "may attend"; ``None`` is full bidirectional attention. With a cache, K is the
cache length plus L and the cache decides whether the new keys are stored (see :mod:`.cache`).
Logits are returned as the network computes them; the Dream one-position shift is the decoder's job
(``ModelHandle.shift_logits``) so a cached window can ask for one extra query position.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import nn

from .layers import Attention, MoE, RMSNorm, SwiGLU, rotary_cos_sin


@dataclass(frozen=True)
class ModelArgs:
    """Architecture hyper-parameters in one vocabulary, filled by each architecture from config.json."""

    vocab_size: int
    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int
    norm_eps: float
    rope_theta: float
    rotary_dim: int
    qkv_bias: bool = False
    qk_norm: bool = False
    fused_qkv: bool = False
    # mixture of experts (moe_layers lists which layers route; empty = dense model)
    moe_layers: tuple[int, ...] = ()
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    norm_topk_prob: bool = True
    router: str = "softmax"  # "softmax" (Qwen3-MoE, LLaDA-MoE) or "sigmoid_group" (LLaDA2)
    router_bias: bool = False  # softmax router with a selection bias added to its probabilities (LLaDA-MoE)
    shared_intermediate_size: int = 0  # shared expert width when not num_shared_experts x the expert width
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    extra: dict = field(default_factory=dict)


class DecoderLayer(nn.Module):
    def __init__(self, args: ModelArgs, idx: int):
        super().__init__()
        self.attn_norm = RMSNorm(args.hidden_size, args.norm_eps)
        self.attn = Attention(args, idx)
        self.mlp_norm = RMSNorm(args.hidden_size, args.norm_eps)
        self.mlp = MoE(args) if idx in args.moe_layers else SwiGLU(args.hidden_size, args.intermediate_size)

    def forward(self, h, cos, sin, mask, cache):
        h = h + self.attn(self.attn_norm(h), cos, sin, mask, cache)
        return h + self.mlp(self.mlp_norm(h))


class DiffusionTransformer(nn.Module):
    """Embedding -> N decoder layers -> final RMSNorm -> untied LM head."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        if torch.get_default_device().type == "meta":  # a skeleton for loaded weights: no initialisation (a
            # random one on meta imports torch._dynamo, 1.2-1.8 s of every process that loads a model)
            self.embed = nn.Embedding.from_pretrained(torch.empty(args.vocab_size, args.hidden_size), freeze=False)
        else:
            self.embed = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(args, i) for i in range(args.n_layers))
        self.norm = RMSNorm(args.hidden_size, args.norm_eps)
        self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    def use_attention(self, name: str) -> str:
        """Select the attention kernel (``auto``, ``sdpa``, ``flash``, ``flex``); returns the one chosen."""
        from .attention import kernels, resolve

        chosen = resolve(name, self.embed.weight.device)
        for layer in self.layers:
            layer.attn.kernel = kernels.get(chosen)
        return chosen

    @contextmanager
    def attention_kernel(self, name: str):
        """Use kernel ``name`` inside the block, then restore the previous one (training may want FlexAttention
        block masks while rollout decoding keeps its own kernel on the same weights)."""
        previous = [layer.attn.kernel for layer in self.layers]
        self.use_attention(name)
        try:
            yield
        finally:
            for layer, kernel in zip(self.layers, previous):
                layer.attn.kernel = kernel

    @contextmanager
    def attention_probe(self, probe: Callable[[int, torch.Tensor], None]):
        """Inside the block every layer attends eagerly and hands ``probe(layer, weights (B, Hq, L, K))`` its
        attention weights (d2Cache's attention rollout); the previous kernels come back after."""
        from .attention import eager_with_weights

        def probed(layer, q, k, v, mask):
            out, weights = eager_with_weights(q, k, v, mask)
            probe(layer, weights)
            return out

        previous = [layer.attn.kernel for layer in self.layers]
        for i, layer in enumerate(self.layers):
            layer.attn.kernel = partial(probed, i)
        try:
            yield
        finally:
            for layer, kernel in zip(self.layers, previous):
                layer.attn.kernel = kernel

    def hidden_states(self, input_ids: torch.Tensor | None, positions: torch.Tensor, mask: torch.Tensor | None = None,
                      cache=None, logits_range: tuple[int, int] | None = None,
                      inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids/positions (B, L) -> final normed hidden states (B, L, H); with ``logits_range`` (lo, hi)
        only query positions lo..hi-1 (B, hi - lo, H); ``inputs_embeds`` (B, L, H) replaces the embedding
        lookup (then ``input_ids`` is None). Trainers apply the LM head themselves, in chunks."""
        cos, sin = rotary_cos_sin(positions, self.args.rotary_dim, self.args.rope_theta)
        h = self.embed(input_ids) if inputs_embeds is None else inputs_embeds
        for layer in self.layers:
            h = layer(h, cos, sin, mask, cache)
        if cache is not None:
            cache.finish_call()
        if logits_range is not None:
            h = h[:, logits_range[0]:logits_range[1]]
        return self.norm(h)

    def forward(self, input_ids: torch.Tensor | None, positions: torch.Tensor, mask: torch.Tensor | None = None,
                cache=None, logits_range: tuple[int, int] | None = None,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids/positions (B, L) -> logits (B, L, V) in the parameters' dtype; with ``logits_range``
        (lo, hi) only the logits of query positions lo..hi-1 are computed (B, hi - lo, V); ``inputs_embeds``
        (B, L, H) in place of ``input_ids`` (None) skips the embedding lookup."""
        return self.lm_head(self.hidden_states(input_ids, positions, mask, cache, logits_range, inputs_embeds))

    def init_random(self, generator: torch.Generator, std: float = 0.02) -> None:
        """Random N(0, std) weights, unit norms, small expert biases: for tiny test checkpoints."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
                elif name.endswith("expert_bias"):
                    p.copy_(0.01 * torch.randn(p.shape, generator=generator))
                else:
                    p.copy_(std * torch.randn(p.shape, generator=generator))
