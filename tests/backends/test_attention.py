"""Attention kernels agree with SDPA; the run-time choice refuses what this machine cannot do."""

from __future__ import annotations

import pytest
import torch

from dare.backends.models.attention import kernels, resolve
from dare.harness.errors import ConfigError, PrerequisiteError, RegistryError


def _qkv(b=2, hq=4, hkv=2, n=24, d=16):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(b, hq, n, d, generator=g), torch.randn(b, hkv, n, d, generator=g),
            torch.randn(b, hkv, n, d, generator=g))


def block_causal(n: int, block: int, pad: int) -> torch.Tensor:
    """(2, 1, n, n): row 0 block-causal, row 1 the same with ``pad`` left-padding keys hidden."""
    blocks = torch.arange(n) // block
    mask = blocks[:, None] >= blocks[None, :]
    padded = mask.clone()
    padded[:, :pad] = False
    padded[:pad, :pad] = torch.eye(pad, dtype=torch.bool)  # padding rows see themselves (no empty rows)
    return torch.stack([mask, padded])[:, None]


def test_flex_is_refused_on_cpu_and_auto_never_picks_it():
    """FlexAttention on CPU is not a path the project runs: its CPU results depend on the CPU's vector unit
    (on AVX2-only EPYCs they differ from SDPA by up to 1.6, once NaN), so it is refused there and its
    equality with SDPA is checked on CUDA (tests/gpu/test_attention_cuda.py)."""
    with pytest.raises(ConfigError, match="attention=flex runs on a CUDA device only; use attention=sdpa"):
        resolve("flex", "cpu")
    assert resolve("auto", "cpu") == "sdpa"


def test_flash_kernel_falls_back_to_sdpa_where_it_cannot_run():
    q, k, v = _qkv()
    mask = block_causal(24, 8, 0)
    assert torch.equal(kernels.get("flash")(q, k, v, mask), kernels.get("sdpa")(q, k, v, mask))


def test_choice_at_run_time():
    assert resolve("auto", "cpu") == "sdpa"
    assert resolve("sdpa", "cpu") == "sdpa"
    with pytest.raises(ConfigError, match="CUDA"):
        resolve("flex", "cpu")
    with pytest.raises((ConfigError, PrerequisiteError)):
        resolve("flash", "cpu")
    with pytest.raises(RegistryError, match=r"did you mean 'sdpa'.*\(available: auto, flash, flex, sdpa\)"):
        resolve("sdp", "cpu")
