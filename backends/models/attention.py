"""Attention kernels, chosen at run time: SDPA everywhere, flash-attn or FlexAttention on a GPU.

Every kernel takes post-RoPE ``q`` (B, Hq, L, D), ``k``/``v`` (B, Hkv, K, D) and a boolean ``mask``
(B, 1, L, K), True = may attend, or None for full attention, and returns (B, Hq, L, D). ``auto`` picks
flash-attn when it is installed and the tensors are on CUDA in half precision, else SDPA. flash-attn
has no arbitrary masks, so calls with a mask (padding, block-causal) fall back to SDPA; FlexAttention
turns the dense mask into a block mask (worth it for long block-causal canvases).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from dare.harness.errors import ConfigError, PrerequisiteError, RegistryError
from dare.harness.registry import Registry, did_you_mean

Kernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]
kernels: Registry[Kernel] = Registry("attention kernel")


def _repeat_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    groups = q.shape[1] // k.shape[1]
    if groups == 1:
        return k, v
    return k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)


@kernels.register("sdpa")
def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    k, v = _repeat_kv(q, k, v)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def eager_with_weights(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention that also returns its weights (B, Hq, L, K): the Hugging Face model files' ``eager`` path (scores
    in the inputs' dtype, softmax in float32 cast back). Not a registered kernel: strategies that read the
    attention map (d2Cache's rollout) get it through ``DiffusionTransformer.attention_probe``."""
    k, v = _repeat_kv(q, k, v)
    scores = (q @ k.transpose(2, 3)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1, dtype=torch.float32).to(q.dtype)
    return weights @ v, weights


@kernels.register("flash")
def flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is not None or q.device.type != "cuda" or q.dtype not in (torch.float16, torch.bfloat16):
        return sdpa(q, k, v, mask)
    from flash_attn import flash_attn_func  # (B, L, H, D) layout, GQA native, non-causal

    out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=False)
    return out.transpose(1, 2)


_compiled_flex = None


def _flex_attention():
    """FlexAttention compiled once per process: eager flex_attention materialises the full score matrix,
    which would forfeit the block mask's savings."""
    global _compiled_flex
    if _compiled_flex is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex = torch.compile(flex_attention, dynamic=None)
    return _compiled_flex


@kernels.register("flex")
def flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    from torch.nn.attention.flex_attention import create_block_mask

    block_mask = None
    if mask is not None:
        dense = mask[:, 0]

        def mask_mod(b, h, q_idx, kv_idx):
            return dense[b, q_idx, kv_idx]

        block_mask = create_block_mask(mask_mod, dense.shape[0], None, q.shape[2], k.shape[2], device=q.device)
    return _flex_attention()(q, k, v, block_mask=block_mask, enable_gqa=q.shape[1] != k.shape[1])


def resolve(name: str, device: torch.device | str) -> str:
    """The kernel name to use for ``name`` (``auto`` or a registered kernel) on ``device``."""
    on_gpu = torch.device(device).type == "cuda"
    if name == "auto":
        return "flash" if on_gpu and importlib.util.find_spec("flash_attn") else "sdpa"
    if name not in kernels:  # `auto` is a choice too, so the suggestions and the list name it
        choices = ["auto", *kernels.names()]
        raise RegistryError(f"unknown attention kernel {name!r}{did_you_mean(name, choices)} "
                            f"(available: {', '.join(choices)})")
    if name == "flash" and not importlib.util.find_spec("flash_attn"):
        raise PrerequisiteError("attention=flash needs flash-attn: "
                                "pip install flash-attn --no-build-isolation (CUDA only)")
    if name in ("flash", "flex") and not on_gpu:
        raise ConfigError(f"attention={name} runs on a CUDA device only; use attention=sdpa (or auto) on {device}")
    return name
