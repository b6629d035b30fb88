"""Building blocks shared by every architecture: RMSNorm, rotary embedding, attention, SwiGLU, MoE.

Shapes: B batch, L query length, K key length, H hidden size, Hq / Hkv query / key-value heads,
D head dim, E experts, I expert (or MLP) width, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import sdpa


class RMSNorm(nn.Module):
    """``x * rsqrt(mean(x^2) + eps) * weight``, computed in float32 and cast back (no Gemma ``1 + w``)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


def rotary_cos_sin(positions: torch.Tensor, rotary_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables (B, L, rotary_dim) in float32 for integer ``positions`` (B, L), NeoX layout."""
    inv_freq = theta ** (-torch.arange(0, rotary_dim, 2, device=positions.device, dtype=torch.float32) / rotary_dim)
    angles = positions.float()[..., None] * inv_freq  # (B, L, rotary_dim / 2)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``cos.shape[-1]`` dims of x (B, heads, L, D) with the rotate-half rule; the rest pass."""
    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    x1, x2 = x_rot.float().chunk(2, dim=-1)
    cos, sin = cos[:, None], sin[:, None]  # broadcast over heads
    rotated = x_rot.float() * cos + torch.cat([-x2, x1], dim=-1) * sin
    return torch.cat([rotated.to(x.dtype), x_pass], dim=-1)


class Attention(nn.Module):
    """Multi-head attention with GQA, optional QKV bias, per-head QK-norm, partial RoPE and a fused QKV.

    The KV cache (see :mod:`.cache`) receives post-RoPE keys, so cached entries never need re-rotation.
    """

    def __init__(self, args, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.n_heads, self.n_kv, self.head_dim = args.n_heads, args.n_kv_heads, args.head_dim
        q_out, kv_out = self.n_heads * self.head_dim, self.n_kv * self.head_dim
        if args.fused_qkv:
            self.qkv = nn.Linear(args.hidden_size, q_out + 2 * kv_out, bias=args.qkv_bias)
        else:
            self.q = nn.Linear(args.hidden_size, q_out, bias=args.qkv_bias)
            self.k = nn.Linear(args.hidden_size, kv_out, bias=args.qkv_bias)
            self.v = nn.Linear(args.hidden_size, kv_out, bias=args.qkv_bias)
        self.o = nn.Linear(q_out, args.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, args.norm_eps) if args.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, args.norm_eps) if args.qk_norm else None
        self.fused = args.fused_qkv
        self.kernel = sdpa  # swapped by DiffusionTransformer.use_attention

    def forward(self, x, cos, sin, mask, cache=None) -> torch.Tensor:
        """x (B, L, H); cos/sin (B, L, rot); mask bool (B, 1, L, K) or None (full); returns (B, L, H)."""
        b, n, _ = x.shape
        if self.fused:
            qkv = self.qkv(x).view(b, n, self.n_heads + 2 * self.n_kv, self.head_dim)
            q, k, v = qkv.split([self.n_heads, self.n_kv, self.n_kv], dim=2)
        else:
            q = self.q(x).view(b, n, self.n_heads, self.head_dim)
            k = self.k(x).view(b, n, self.n_kv, self.head_dim)
            v = self.v(x).view(b, n, self.n_kv, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, heads, L, D)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)
        out = self.kernel(q, k, v, mask)
        return self.o(out.transpose(1, 2).reshape(b, n, -1))


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) * up(x))`` without biases."""

    def __init__(self, hidden: int, width: int):
        super().__init__()
        self.gate = nn.Linear(hidden, width, bias=False)
        self.up = nn.Linear(hidden, width, bias=False)
        self.down = nn.Linear(width, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """Routed SwiGLU experts stacked as (E, I, H) / (E, H, I) tensors, plus an optional shared expert.

    The router is a callable ``(logits_input (T, H)) -> (weights (T, k), experts (T, k))`` chosen by the
    architecture (softmax top-k for Qwen3-MoE and LLaDA-MoE, sigmoid group-limited for LLaDA2).
    """

    def __init__(self, args):
        super().__init__()
        e, i, h = args.num_experts, args.moe_intermediate_size, args.hidden_size
        self.router = nn.Linear(h, e, bias=False)
        biased = args.router == "sigmoid_group" or args.router_bias
        self.expert_bias = nn.Parameter(torch.zeros(e), requires_grad=False) if biased else None
        self.experts_gate = nn.Parameter(torch.empty(e, i, h))
        self.experts_up = nn.Parameter(torch.empty(e, i, h))
        self.experts_down = nn.Parameter(torch.empty(e, h, i))
        shared = args.shared_intermediate_size or i * args.num_shared_experts
        self.shared = SwiGLU(h, shared) if shared else None
        self.args = args

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (T, H) -> routing weights (T, k) in x's dtype and expert ids (T, k)."""
        a = self.args
        logits = F.linear(x.float(), self.router.weight.float())  # routers run in fp32
        if a.router == "softmax":
            probs = logits.softmax(-1)
            if self.expert_bias is not None:  # LLaDA-MoE: the bias moves the selection and stays in the weights
                probs = probs + self.expert_bias.float()
            weights, experts = probs.topk(a.num_experts_per_tok, dim=-1)
            if a.norm_topk_prob:
                weights = weights / weights.sum(-1, keepdim=True)
            return weights.to(x.dtype), experts
        scores = logits.sigmoid()
        biased = scores + self.expert_bias.float()
        groups = biased.view(x.shape[0], a.n_group, -1)
        group_score = groups.topk(2, dim=-1).values.sum(-1)  # (T, n_group)
        keep = torch.zeros_like(group_score, dtype=torch.bool)
        keep.scatter_(1, group_score.topk(a.topk_group, dim=-1).indices, True)
        biased = groups.masked_fill(~keep[..., None], float("-inf")).view(x.shape[0], -1)
        experts = biased.topk(a.num_experts_per_tok, dim=-1).indices
        weights = scores.gather(1, experts)
        if a.num_experts_per_tok > 1:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return (weights * a.routed_scaling_factor).to(x.dtype), experts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        weights, experts = self.route(flat)
        out = torch.zeros_like(flat)
        for e in experts.unique().tolist():  # loop over active experts only
            token_idx, slot = (experts == e).nonzero(as_tuple=True)
            h = flat[token_idx]
            hidden = F.silu(F.linear(h, self.experts_gate[e])) * F.linear(h, self.experts_up[e])
            y = F.linear(hidden, self.experts_down[e])
            out.index_add_(0, token_idx, y * weights[token_idx, slot, None])
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view(shape)
