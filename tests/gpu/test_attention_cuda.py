"""On CUDA: flash-attn (when installed) and FlexAttention agree with SDPA in bf16, and ``auto`` engages."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from dare.backends.models.attention import kernels, resolve

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _inputs(masked: bool):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(2, 8, 256, 64, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(2, 2, 256, 64, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(2, 2, 256, 64, device="cuda", dtype=torch.bfloat16, generator=g)
    blocks = torch.arange(256, device="cuda") // 32
    mask = (blocks[:, None] >= blocks[None, :]).expand(2, 1, 256, 256) if masked else None
    return q, k, v, mask


@pytest.mark.parametrize("name", ["flex", "flash"])
@pytest.mark.parametrize("masked", [False, True])
def test_kernel_matches_sdpa(name, masked):
    if name == "flash" and not importlib.util.find_spec("flash_attn"):
        pytest.skip("flash-attn not installed")
    q, k, v, mask = _inputs(masked)
    want = kernels.get("sdpa")(q, k, v, mask).float()
    got = kernels.get(resolve(name, "cuda"))(q, k, v, mask).float()
    assert ((got - want).norm() / want.norm()).item() < 2e-2
