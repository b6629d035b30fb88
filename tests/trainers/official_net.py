"""A tiny seeded network that both the official loss code (in the fixture scripts under fixtures/scripts/) and
DARE's estimators can call, so a fixture's loss and gradient can be recomputed here exactly.

:class:`TinyNet` maps token ids (B, L) to logits (B, L, V) with a bidirectional context term (every logit
depends on every token, so which positions a mask hides changes every value); called the official way,
``net(ids).logits``. :class:`NetPolicy` speaks DARE's policy protocol over the same network (rows without
prompt padding, so DARE's layout is the official ``cat([prompt, completion])``).
"""

from __future__ import annotations

import types

import torch
from torch import nn

VOCAB, MASK_ID, PAD_ID, EOS_ID = 12, 11, 10, 9


class TinyNet(nn.Module):
    """ids (B, L) -> SimpleNamespace(logits (B, L, V)); weights drawn from ``seed`` in float64."""

    def __init__(self, seed: int = 0, dim: int = 6, max_len: int = 32):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.embed = nn.Parameter(torch.randn(VOCAB, dim, generator=g, dtype=torch.float64))
        self.pos = nn.Parameter(torch.randn(max_len, dim, generator=g, dtype=torch.float64))
        self.mix = nn.Parameter(torch.randn(dim, dim, generator=g, dtype=torch.float64) / dim ** 0.5)
        self.out = nn.Parameter(2.0 * torch.randn(dim, VOCAB, generator=g, dtype=torch.float64))
        self.config = types.SimpleNamespace(name_or_path="tiny-LLaDA")  # GDSD tests the path for "LLaDA"

    def forward(self, ids: torch.Tensor, **_) -> types.SimpleNamespace:
        h = self.embed[ids] + self.pos[:ids.shape[1]]
        context = h.mean(1, keepdim=True) @ self.mix
        return types.SimpleNamespace(logits=torch.tanh(h + context) @ self.out)

    def nudged(self, scale: float, seed: int) -> TinyNet:
        """A copy with every weight moved by ``scale`` x N(0, 1) (generator ``seed``): an old or reference policy
        close enough that ratios straddle a clip range."""
        other = TinyNet()
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for mine, theirs in zip(self.parameters(), other.parameters()):
                theirs.copy_(mine + scale * torch.randn(mine.shape, generator=g, dtype=mine.dtype))
        return other

    def flat_grad(self) -> torch.Tensor:
        """Every parameter's gradient, concatenated (zeros where none)."""
        return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in self.parameters()])


class NetPolicy:
    """DARE's policy protocol over a :class:`TinyNet` (masked diffusion, full attention)."""

    attention, block_size, shift_logits = "bidirectional", None, False
    mask_id, pad_id, eos_id = MASK_ID, PAD_ID, EOS_ID

    def __init__(self, net: TinyNet):
        self.net = net
        self.device = torch.device("cpu")

    def parameters(self):
        return self.net.parameters()

    def token_logp(self, input_ids, positions, mask, index, targets, temperature: float = 1.0):
        logits = self.net(input_ids).logits.gather(1, index[..., None].expand(-1, -1, VOCAB)) / temperature
        logp_all = logits.log_softmax(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1).detach()
        return logp_all.gather(-1, targets[..., None])[..., 0], entropy


def net_batch(prompt: torch.Tensor, completion: torch.Tensor, group_ids: torch.Tensor, rewards: torch.Tensor,
              completion_mask: torch.Tensor | None = None):
    """A RolloutBatch of unpadded prompts (B, P) and completions (B, T)."""
    from dare.trainers.batch import RolloutBatch

    mask = torch.ones_like(completion, dtype=torch.bool) if completion_mask is None else completion_mask.bool()
    return RolloutBatch(prompt_ids=prompt, prompt_mask=torch.ones_like(prompt, dtype=torch.bool),
                        completion_ids=completion, completion_mask=mask,
                        completion_attn=torch.ones_like(completion, dtype=torch.bool), group_ids=group_ids,
                        rewards=rewards)
