"""Masked-diffusion likelihood estimators: d1's one-step estimate and Coupled-GRPO's complementary masks.

What is guaranteed: ``one_step`` is d1's mean-field surrogate (the whole response masked, the prompt
masked i.i.d. with probability p): it is *not* an unbiased log-likelihood. ``coupled`` covers every
response token exactly once with the pair (z1, z2); for a context-free model its expectation is
1.5 log p(y) with the full-mask term (DiffuCoder's scale) and log p(y) without it.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from ..api import Estimator, estimator
from ..batch import Estimate, RolloutBatch
from ..training.sequences import Layout, block_causal_mask, build_layout, key_mask


def attention_mask(policy, layout: Layout, valid: torch.Tensor | None = None) -> torch.Tensor:
    """The policy's own attention pattern over one copy of the sequence: (B, 1, L, L)."""
    valid = layout.valid if valid is None else valid
    if policy.block_size is None:
        return key_mask(valid)
    return block_causal_mask(layout.positions, valid, policy.block_size)


def response_logp(policy, layout: Layout, inputs: torch.Tensor, batch: RolloutBatch, copies: int) -> Estimate:
    """Run ``copies`` corrupted versions stacked as (copies * B, L); returns log p of the completion tokens
    as token_logp (copies, B, T) and entropy (copies, B, T)."""
    b = batch.size
    positions = layout.positions.repeat(copies, 1)
    mask = attention_mask(policy, layout).repeat(copies, 1, 1, 1)
    index = layout.response_index().repeat(copies, 1)
    targets = batch.completion_ids.repeat(copies, 1)
    logp, entropy = policy.token_logp(inputs, positions, mask, index, targets)
    shape = (copies, b, -1)
    return Estimate(logp.view(shape), entropy.view(shape))


@estimator("one_step")
class OneStep(Estimator):
    """d1 / diffu-GRPO: prompt positions masked i.i.d. with ``prompt_mask_prob``, every response token masked,
    one forward; token_logp[i] = log p(y_i | z).

    ``prompt_padding="attended"`` (d1's ``forward_process`` / ``get_logits``, dllm-reasoning/d1
    diffu-grpo/diffu_grpo_trainer.py: ``prompt_index`` covers every prompt column and the model runs without
    an attention mask): left-padding prompt positions are visible tokens at their own positions and are
    masked like any prompt token. ``"hidden"`` (DARE's ``_forward_process_d1``): padding is neither seen nor
    masked; only real prompt tokens are."""

    forwards = 1

    def __init__(self, prompt_mask_prob: float = 0.15, prompt_padding: str = "attended"):
        if prompt_padding not in ("attended", "hidden"):
            raise ValueError(f"prompt_padding must be 'attended' or 'hidden', got {prompt_padding!r}")
        self.prompt_mask_prob = float(prompt_mask_prob)
        self.prompt_padding = prompt_padding

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        u = torch.rand(batch.prompt_ids.shape, generator=generator)
        masked = u < self.prompt_mask_prob
        if self.prompt_padding == "hidden":
            masked &= batch.prompt_mask.cpu()
        return {"prompt_masked": masked}

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        if self.prompt_padding == "attended":  # the padding becomes ordinary visible prompt tokens
            batch = replace(batch, prompt_mask=torch.ones_like(batch.prompt_mask))
        layout = build_layout(batch)
        inputs = layout.tokens.clone()
        prompt = inputs[:, :layout.prompt_width]
        inputs[:, :layout.prompt_width] = prompt.masked_fill(noise["prompt_masked"].to(prompt.device), policy.mask_id)
        inputs[:, layout.response] = policy.mask_id
        est = response_logp(policy, layout, inputs, batch, 1)
        return Estimate(est.token_logp[0], est.entropy[0])


@estimator("coupled")
class Coupled(Estimator):
    """Coupled-GRPO (DiffuCoder): t ~ U(t_min, t_max), u ~ U(0,1)^T; z1 masks u < t, z2 the complement,
    z0 masks everything. token_logp = (lp0 + [lp1 / t on z1's mask, lp2 / (1 - t) on z2's]) / 2
    (apple/ml-diffucoder src/open_r1/coupled_grpo.py ``forward_process`` and ``selective_log_softmax``).
    One t per draw for the whole batch (``forward_process`` draws ``mask_ratio`` once per call); u per row.

    ``include_full_mask=False`` drops z0 (2 forwards; expectation log p for a context-free model)."""

    forwards = 3

    def __init__(self, t_min: float = 0.2, t_max: float = 0.8, include_full_mask: bool = True):
        if not 0 < t_min <= t_max < 1:
            raise ValueError("need 0 < t_min <= t_max < 1")
        self.t_min, self.t_max, self.include_full_mask = float(t_min), float(t_max), bool(include_full_mask)

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        b, t = batch.completion_ids.shape
        level = self.t_min + (self.t_max - self.t_min) * torch.rand(1, generator=generator, dtype=torch.float64)
        level = level.expand(b).clone()  # (B,): one mask ratio shared by every row of the call
        u = torch.rand(b, t, generator=generator, dtype=torch.float64)
        return {"t": level, "first": u < level[:, None]}

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        layout = build_layout(batch)
        device = layout.tokens.device
        first = noise["first"].to(device)
        level = noise["t"].to(device)[:, None]
        copies = [~first, first] + ([torch.ones_like(first)] if self.include_full_mask else [])
        inputs = []
        for masked in copies:
            x = layout.tokens.clone()
            x[:, layout.response] = x[:, layout.response].masked_fill(masked, policy.mask_id)
            inputs.append(x)
        est = response_logp(policy, layout, torch.cat(inputs), batch, len(copies))
        lp = est.token_logp
        pair = torch.where(first, lp[1] / level.to(lp.dtype), lp[0] / (1 - level).to(lp.dtype))
        token = 0.5 * (lp[2] + pair) if self.include_full_mask else 0.5 * pair
        return Estimate(token, est.entropy[-1])
