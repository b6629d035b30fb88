"""Toy policies whose true likelihood is known, speaking the estimators' policy interface.

:class:`JointPolicy` answers every query with the *exact* conditional of one random joint distribution
over V^n responses given the response tokens the query can see (through the attention mask and not
masked), so log p(y) is known and ELBO estimators must be unbiased for it. :class:`ContextFreePolicy`
ignores the context (learnable per-slot logits), so gradients have a closed form.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn

from dare.trainers.batch import RolloutBatch


def make_batch(rows: int, prompt_len: int, response: list[int], prompt_token: int = 0) -> RolloutBatch:
    """``rows`` copies of one (prompt, response) pair, no padding."""
    t = len(response)
    return RolloutBatch(
        prompt_ids=torch.full((rows, prompt_len), prompt_token, dtype=torch.long),
        prompt_mask=torch.ones(rows, prompt_len, dtype=torch.bool),
        completion_ids=torch.tensor([response] * rows, dtype=torch.long),
        completion_mask=torch.ones(rows, t, dtype=torch.bool),
        completion_attn=torch.ones(rows, t, dtype=torch.bool),
        group_ids=torch.arange(rows))


def sequence_draws(name: str, options: dict, policy, response: list[int], rows: int, seed: int = 0) -> torch.Tensor:
    """``rows`` independent draws (rows,) float64 of estimator ``name``'s sequence log-likelihood of ``response``."""
    from dare.trainers import build_estimator

    est = build_estimator(name, options)
    batch = make_batch(rows, policy.prompt_len, response)
    noise = est.draw(batch, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return est.estimate(policy, batch, noise).token_logp.double().sum(-1)


class _Toy(nn.Module):
    attention = "bidirectional"
    shift_logits = False

    def __init__(self, n: int, vocab: int, prompt_len: int, block_size: int | None):
        super().__init__()
        self.n, self.vocab, self.prompt_len, self.block_size = n, vocab, prompt_len, block_size
        self.mask_id, self.pad_id, self.eos_id = vocab, vocab + 1, vocab - 1
        self.attention = "block_causal" if block_size else "bidirectional"

    def _slots(self, positions):
        return positions - self.prompt_len  # response slot of each sequence position (< 0: prompt)


class JointPolicy(_Toy):
    def __init__(self, n: int = 4, vocab: int = 3, prompt_len: int = 1, block_size: int | None = None, seed: int = 0):
        super().__init__(n, vocab, prompt_len, block_size)
        g = torch.Generator().manual_seed(seed)
        self.joint = torch.softmax(2.0 * torch.randn(vocab ** n, generator=g, dtype=torch.float64), 0)
        self.seqs = torch.tensor(list(itertools.product(range(vocab), repeat=n)))  # (V^n, n)

    def log_prob(self, response: list[int]) -> float:
        idx = int(sum(v * self.vocab ** (self.n - 1 - i) for i, v in enumerate(response)))
        return float(self.joint[idx].log())

    def token_logp(self, input_ids, positions, mask, index, targets, temperature: float = 1.0):
        """The exact conditional; with ``temperature`` T its tempered version p^(1/T) / sum_v p_v^(1/T)."""
        if temperature != 1.0:
            per_value = torch.stack([self.token_logp(input_ids, positions, mask, index, torch.full_like(targets, v))[0]
                                     for v in range(self.vocab)], -1).double() / temperature
            logp = per_value.gather(-1, targets[..., None])[..., 0] - per_value.logsumexp(-1)
            return logp.float(), torch.zeros_like(logp, dtype=torch.float32)
        b, n_q = index.shape
        slots = self._slots(positions)
        key_ok = (slots >= 0) & (input_ids != self.mask_id) & (input_ids < self.vocab)
        rows = mask[:, 0].gather(1, index[..., None].expand(-1, -1, mask.shape[-1]))  # (B, N, Lk)
        sees = rows & key_ok[:, None, :]
        onehot = torch.nn.functional.one_hot(slots.clamp(0, self.n - 1), self.n).bool() & (slots >= 0)[..., None]
        vis = (sees[..., None] & onehot[:, None]).any(2)  # (B, N, n)
        val = ((sees[..., None] & onehot[:, None]) * input_ids[:, None, :, None]).amax(2)  # (B, N, n)
        agree = (~vis[:, :, None, :]) | (self.seqs[None, None] == val[:, :, None, :])
        consistent = agree.all(-1).double() * self.joint  # (B, N, V^n)
        q_slot = slots.gather(1, index)
        hit = self.seqs.T[q_slot.clamp(0, self.n - 1)] == targets[..., None]  # (B, N, V^n)
        logp = (consistent * hit).sum(-1).log() - consistent.sum(-1).log()
        return logp.float(), torch.zeros_like(logp, dtype=torch.float32)


class ContextFreePolicy(_Toy):
    def __init__(self, n: int = 3, vocab: int = 4, prompt_len: int = 1, seed: int = 0,
                 dtype: torch.dtype = torch.float64):
        super().__init__(n, vocab, prompt_len, None)
        g = torch.Generator().manual_seed(seed)
        self.logits = nn.Parameter(torch.randn(n, vocab, generator=g, dtype=torch.float64).to(dtype))

    def token_logp(self, input_ids, positions, mask, index, targets, temperature: float = 1.0):
        slot = self._slots(positions).gather(1, index).clamp(0, self.n - 1)
        logp_all = (self.logits / temperature).log_softmax(-1)[slot]  # (B, N, V)
        logp = logp_all.gather(-1, targets[..., None])[..., 0]
        entropy = -(logp_all.exp() * logp_all).sum(-1).detach()
        return logp, entropy
