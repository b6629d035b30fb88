"""The toy network and segment batch behind the d-TreeRPO loss fixture (tests/trainers/fixtures/dtreerpo_official.json).

:class:`ToyDenoiser` is a small context-dependent masked denoiser (every position sees the mean of the whole
sequence); :class:`ToyPolicy` speaks the estimators' policy interface over it. The fixture script runs
DARE's actor on the same weights through a packed-logits stand-in, so both sides score the same network.
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB, MASK, EOS = 8, 7, 6  # tokens 0..5 plain, 6 EOS, 7 mask
PROMPT = [1, 2, 3]


class ToyDenoiser(nn.Module):
    """ids (B, L) -> logits (B, L, VOCAB): per-position features plus the sequence mean, one hidden layer."""

    def __init__(self, seed: int = 0, width: int = 16, length: int = 16, certain: tuple[int, int] | None = None):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.embed = nn.Parameter(torch.randn(VOCAB, width, generator=g) * 0.5)
        self.position = nn.Parameter(torch.randn(length, width, generator=g) * 0.5)
        self.mix = nn.Parameter(torch.randn(width, width, generator=g) / width ** 0.5)
        self.out = nn.Parameter(torch.randn(width, VOCAB, generator=g) / width ** 0.5)
        self.bias = nn.Parameter(torch.zeros(length, VOCAB))
        if certain is not None:
            with torch.no_grad():
                self.bias[certain] = 200.0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed[ids] + self.position[: ids.shape[1]]
        h = torch.tanh(h + h.mean(1, keepdim=True) @ self.mix)
        return h @ self.out + self.bias[: ids.shape[1]]


class ToyPolicy:
    """The estimators' policy interface over a :class:`ToyDenoiser` (bidirectional, no shift)."""

    attention, block_size, shift_logits = "bidirectional", None, False
    mask_id, pad_id, eos_id = MASK, EOS, EOS

    def __init__(self, net: ToyDenoiser):
        self.net = net

    def token_logp(self, input_ids, positions, mask, index, targets, temperature: float = 1.0):
        logp = (self.net(input_ids) / temperature).log_softmax(-1)
        picked = logp.gather(1, index[..., None].expand(-1, -1, VOCAB))
        entropy = -(picked.exp() * picked).sum(-1).detach()
        return picked.gather(-1, targets[..., None])[..., 0], entropy


def segment_case() -> dict:
    """Nine edges of one prompt: a root group of three children and two groups of three grandchildren, with
    their canvases (prompt + 8 completion slots), advantages, behaviour and reference log-prob shifts."""
    m = MASK
    parents = {
        "root": [m] * 8,
        "a": [4, m, m, 2, m, m, m, m],
        "b": [m, 5, m, m, 0, m, m, m],
    }
    children = [  # (parent, child canvas)
        ("root", [4, m, m, 2, m, m, m, m]), ("root", [m, 5, m, m, 0, m, m, m]), ("root", [4, m, 1, m, m, m, m, 6]),
        ("a", [4, 3, 1, 2, 6, 6, 6, 6]), ("a", [4, 3, 0, 2, 5, 6, 6, 6]), ("a", [4, 1, 1, 2, 6, 0, 6, 6]),
        ("b", [2, 5, 3, 6, 0, 6, 6, 6]), ("b", [2, 5, 3, 1, 0, 6, 6, 6]), ("b", [4, 5, 1, 6, 0, 2, 3, 6]),
    ]
    groups = {"root": 0, "a": 1, "b": 2}
    return {
        "prompt": PROMPT,
        "parent_ids": [PROMPT + parents[p] for p, _ in children],
        "child_ids": [PROMPT + c for _, c in children],
        "group_ids": [groups[p] for p, _ in children],
        "advantages": [0.5, -0.25, -0.25, 0.75, 0.75, -1.5, -0.3, 0.1, 0.2],
        "old_shift": [0.0, 0.3, -0.6, 0.2, -0.1, 0.6, -0.2, 0.05, 0.5],  # old = new.detach() - shift (so r = e^shift)
        "ref_shift": [0.1, -0.2, 0.3, 0.0, 0.4, -0.3, 0.2, -0.1, 0.25],
        "certain": [4, 3],  # (sequence position, token) given a +200 logit: its log p is exactly 0 (rows 3, 4)
    }
