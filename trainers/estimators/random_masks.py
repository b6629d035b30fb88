"""``random_masking``: UniGRPO's masked copies of a rollout (Gen-Verse/dLLM-RL@10b4fd1 ``train/rl_llada.py``,
``prepare_inputs_and_labels_for_text`` with ``training.method: random_masking``).

Each row gets ``samples`` masked copies; copy j draws its own t_j ~ U[t_min, t_max] and masks every counted
response token independently with probability t_j (the prompt is never masked). The tail after EOS (present
but not counted) is masked in every copy and never scored (dLLM-RL's ``post_num: 0``). The estimate is per copy,
not averaged: token_logp (B, m, T) = log p(y_i | copy j) where copy j masks i, else 0, so a loss can average
each masked copy over its own masked tokens (UniGRPO) or reduce the copies otherwise. A copy that masks
nothing (possible for short responses) scores nothing; dLLM-RL drops it. Unbiasedness: none claimed, this is a
per-token surrogate like d1's, sampled at many mask rates. Shapes: B rows, m copies, T completion tokens.
"""

from __future__ import annotations

import torch

from ..api import Estimator, estimator
from ..batch import Estimate, RolloutBatch
from ..training.sequences import build_layout
from .masked import response_logp


def masked_copies(policy, batch: RolloutBatch, masked: torch.Tensor) -> Estimate:
    """Run the copies masked (B, m, T) (the tail after EOS masked too) as (m B, L); returns log p (B, m, T) of
    the completion tokens in every position and the entropy (B, m, T)."""
    layout = build_layout(batch)
    copies = masked.shape[1]
    hide = masked | (batch.completion_attn & ~batch.completion_mask)[:, None]
    inputs = layout.tokens.repeat(copies, 1)
    resp = inputs[:, layout.response]
    inputs[:, layout.response] = resp.masked_fill(hide.transpose(0, 1).reshape(-1, hide.shape[-1]), policy.mask_id)
    est = response_logp(policy, layout, inputs, batch, copies)  # (m, B, T)
    return Estimate(est.token_logp.transpose(0, 1), est.entropy.transpose(0, 1))


@estimator("random_masking")
class RandomMasking(Estimator):
    """``samples`` copies per row, each masking counted response tokens i.i.d. with its own t ~ U[t_min, t_max]
    (dLLM-RL: 35 copies, U[0.1, 0.9]); token_logp (B, m, T) at each copy's masked positions."""

    def __init__(self, samples: int = 35, t_min: float = 0.1, t_max: float = 0.9):
        if samples < 1 or not 0 <= t_min <= t_max <= 1:
            raise ValueError("need samples >= 1 and 0 <= t_min <= t_max <= 1")
        self.samples, self.t_min, self.t_max = int(samples), float(t_min), float(t_max)
        self.forwards = self.samples

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """t (B, m) float64 and masked (B, m, T) bool (counted tokens only)."""
        b, length = batch.completion_ids.shape
        level = self.t_min + (self.t_max - self.t_min) * torch.rand(b, self.samples, generator=generator,
                                                                    dtype=torch.float64)
        u = torch.rand(b, self.samples, length, generator=generator, dtype=torch.float64)
        return {"t": level, "masked": (u < level[..., None]) & batch.completion_mask.cpu()[:, None]}

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        masked = noise["masked"].to(batch.completion_ids.device)
        est = masked_copies(policy, batch, masked)
        return Estimate(est.token_logp * masked, est.entropy)
