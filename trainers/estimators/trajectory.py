"""Exact per-step likelihoods of a rollout, replayed from its step map: block diffusion (DiPO / DiRL, one
packed forward) and masked diffusion (``mdm_trajectory``, one forward per step; ``autoregressive``, the
left-to-right order of JustGRPO, needs no recorded map).

For every decoding step s of a row, the state is: earlier blocks clean, the current block with the
tokens committed before s visible and the rest masked. Within a block generation conditions only on that
state, so log p(tokens committed at s | state) is exact: no ELBO, no Monte-Carlo noise. All steps are
packed into one forward: ``[clean copy (L) | one K-token window per step]``; window s (block b) sees the
clean keys of blocks < b and itself, the clean copy is block-causal (the FlexAttention-style packing of
DiRL, written here as a dense mask for SDPA). Requires ``batch.commit_step``; decoders that rewrite
committed tokens (LLaDA2.1 editing) are not replayable.
"""

from __future__ import annotations

import torch

from ..api import Estimator, estimator
from ..batch import Estimate, RolloutBatch
from ..training.sequences import Layout, block_causal_mask, build_layout
from .masked import attention_mask


def step_windows(layout: Layout, commit_step: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the distinct commit steps (B, S) (-1 padding) and the block of each step (B, S)."""
    resp_pos = layout.positions[:, layout.response]
    rows_steps, rows_blocks = [], []
    for r in range(commit_step.shape[0]):
        steps = torch.unique(commit_step[r][commit_step[r] >= 0])
        first = (commit_step[r][None, :] == steps[:, None]).float().argmax(-1)
        rows_steps.append(steps)
        rows_blocks.append(resp_pos[r, first] // block)
    width = max((len(s) for s in rows_steps), default=0)
    steps = torch.full((len(rows_steps), width), -1, dtype=torch.long, device=commit_step.device)
    blocks = torch.zeros_like(steps)
    for r, (s, b) in enumerate(zip(rows_steps, rows_blocks)):
        steps[r, :len(s)], blocks[r, :len(b)] = s, b
    return steps, blocks


def packed_inputs(layout: Layout, commit_step: torch.Tensor, steps: torch.Tensor, blocks: torch.Tensor,
                  block: int, mask_id: int, pad_id: int):
    """Inputs (B, L + S K), positions, mask (B, 1, L + S K, L + S K), window target map (B, S K) of
    response indices committed at each window's step (-1 elsewhere)."""
    b, length = layout.tokens.shape
    n_steps = steps.shape[1]
    device = layout.tokens.device
    pad = layout.prompt_width - layout.valid[:, :layout.prompt_width].sum(1)  # left padding per row
    offs = torch.arange(block, device=device)
    seq_idx = pad[:, None, None] + blocks[..., None] * block + offs  # (B, S, K) sequence index of window slot
    inside = seq_idx < length
    safe = seq_idx.clamp(max=length - 1).view(b, -1)
    win_tokens = layout.tokens.gather(1, safe).view(b, n_steps, block)
    win_valid = layout.valid.gather(1, safe).view(b, n_steps, block) & inside & (steps >= 0)[..., None]
    win_pos = blocks[..., None] * block + offs
    full_step = torch.cat([torch.full_like(layout.tokens[:, :layout.prompt_width], -2), commit_step], dim=1)
    slot_step = full_step.gather(1, safe).view(b, n_steps, block)
    hidden = (slot_step >= steps[..., None]) | (slot_step == -1)  # committed at or after s, or never
    win_tokens = torch.where(hidden & win_valid, torch.full_like(win_tokens, mask_id), win_tokens)
    win_tokens = torch.where(win_valid, win_tokens, torch.full_like(win_tokens, pad_id))
    target = torch.where((slot_step == steps[..., None]) & win_valid, seq_idx - layout.prompt_width, -1)

    clean = block_causal_mask(layout.positions, layout.valid, block)[:, 0]  # (B, L, L)
    clean_blk = layout.positions // block
    win_blk = blocks[..., None].expand(-1, -1, block).reshape(b, -1)
    real = win_valid.view(b, -1)
    to_clean = (clean_blk[:, None, :] < win_blk[:, :, None]) & layout.valid[:, None, :] & real[:, :, None]
    win_id = torch.arange(n_steps, device=device).repeat_interleave(block)
    same_win = (win_id[:, None] == win_id[None, :]) & real[:, None, :] & real[:, :, None]  # (B, SK, SK)
    top = torch.cat([clean, torch.zeros(b, length, n_steps * block, dtype=torch.bool, device=device)], dim=2)
    mask = torch.cat([top, torch.cat([to_clean, same_win], dim=2)], dim=1)
    mask |= torch.eye(mask.shape[1], dtype=torch.bool, device=device)
    inputs = torch.cat([layout.tokens, win_tokens.view(b, -1)], dim=1)
    positions = torch.cat([layout.positions, win_pos.view(b, -1)], dim=1)
    return inputs, positions, mask[:, None], target.view(b, -1)


@estimator("block_trajectory")
class BlockTrajectory(Estimator):
    """token_logp[i] = log p(y_i | state at the step that committed y_i): exact, one packed forward."""

    forwards = 1
    capabilities = frozenset({"trajectory"})

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        if batch.commit_step is None:
            raise ValueError("block_trajectory needs the rollout's step map (batch.commit_step)")
        if policy.block_size is None:
            raise ValueError("block_trajectory needs a block-diffusion model")
        layout = build_layout(batch)
        k = policy.block_size
        steps, blocks = step_windows(layout, batch.commit_step, k)
        inputs, positions, mask, target = packed_inputs(layout, batch.commit_step, steps, blocks, k,
                                                        policy.mask_id, policy.pad_id)
        length = layout.tokens.shape[1]
        slots = target >= 0
        index = torch.where(slots, length + torch.arange(target.shape[1], device=target.device), 0)
        targets = batch.completion_ids.gather(1, target.clamp(min=0))
        logp, entropy = policy.token_logp(inputs, positions, mask, index, targets)
        token_logp = torch.zeros(batch.completion_ids.shape, dtype=logp.dtype, device=logp.device)
        token_ent = torch.zeros_like(token_logp)
        rows = torch.arange(batch.size, device=logp.device)[:, None].expand_as(target)
        token_logp = token_logp.index_put((rows[slots], target[slots]), logp[slots])
        token_ent = token_ent.index_put((rows[slots], target[slots]), entropy[slots])
        return Estimate(token_logp, token_ent)


@estimator("mdm_trajectory")
class MaskedTrajectory(Estimator):
    """Masked diffusion (LLaDA, Dream): token_logp[i] = log p(y_i | canvas at the step that committed y_i),
    exact for the decoder's own unmasking order (CJ-GRPO / TraceRL style). With bidirectional attention every
    step needs its own full-canvas forward: one row per (sequence, step), ``steps_per_forward`` rows at a time."""

    forwards = 0  # one per decoding step
    capabilities = frozenset({"trajectory"})

    def __init__(self, steps_per_forward: int = 8, temperature: float = 1.0):
        self.steps_per_forward = int(steps_per_forward)
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    def commit_steps(self, batch: RolloutBatch) -> torch.Tensor:
        """(B, T) long: the step that committed each response token (-1: never, e.g. after EOS)."""
        if batch.commit_step is None:
            raise ValueError("mdm_trajectory needs the rollout's step map (batch.commit_step)")
        return batch.commit_step

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        layout = build_layout(batch)
        commit = self.commit_steps(batch)
        scaled = {"temperature": self.temperature} if self.temperature != 1.0 else {}
        pairs = [(r, int(s)) for r in range(batch.size) for s in torch.unique(commit[r][commit[r] >= 0]).tolist()]
        token_logp = torch.zeros(commit.shape, device=commit.device)
        token_ent = torch.zeros_like(token_logp)
        full_mask = attention_mask(policy, layout)
        for start in range(0, len(pairs), self.steps_per_forward):
            chunk = pairs[start:start + self.steps_per_forward]
            rows = torch.tensor([r for r, _ in chunk], device=commit.device)
            steps = torch.tensor([s for _, s in chunk], device=commit.device)[:, None]
            inputs = layout.tokens[rows].clone()
            hide = (commit[rows] >= steps) | (commit[rows] < 0)
            inputs[:, layout.response] = inputs[:, layout.response].masked_fill(hide, policy.mask_id)
            index = layout.response_index()[rows]
            logp, entropy = policy.token_logp(inputs, layout.positions[rows], full_mask[rows], index,
                                              batch.completion_ids[rows], **scaled)
            now = commit[rows] == steps
            r_idx, c_idx = now.nonzero(as_tuple=True)
            token_logp = token_logp.index_put((rows[r_idx], c_idx), logp[r_idx, c_idx].to(token_logp.dtype))
            token_ent = token_ent.index_put((rows[r_idx], c_idx), entropy[r_idx, c_idx].to(token_ent.dtype))
        return Estimate(token_logp, token_ent)


@estimator("autoregressive")
class Autoregressive(MaskedTrajectory):
    """JustGRPO: the exact left-to-right likelihood of a masked diffusion model, log p(y_t | prompt, y_<t, masks
    at >= t) with the logits divided by ``temperature``: the trajectory of a block-length-1 rollout, known
    without recording it. One full-canvas forward per response token, ``steps_per_forward`` at a time."""

    capabilities = frozenset({"left_to_right"})  # the order is known (nothing to record) if the rollout kept it

    def commit_steps(self, batch: RolloutBatch) -> torch.Tensor:
        order = torch.arange(batch.completion_ids.shape[1], device=batch.completion_ids.device)
        return torch.where(batch.completion_mask, order, -1)
