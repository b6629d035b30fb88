"""Many requests' rows through the network in shared forward batches, and the logits at chosen positions.

Rows of different requests are right-padded to the widest row of their forward batch; padding keys are
hidden from every real query (the mask's diagonal keeps a padding query's own row non-empty), so a real
position sees exactly its request's keys. Only the positions a plan scores reach the LM head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dare.backends.decoding.mdm import CPU_TOKENS_PER_FORWARD

from .base import RowPlan

#: on a GPU, rows go through the network in groups of about this many tokens (logits stay a few GB at a
#: 126k vocabulary because only scored positions reach the LM head)
GPU_TOKENS_PER_FORWARD = 16384


def logits_at(model, tokens: torch.Tensor, positions: torch.Tensor, attention: torch.Tensor, select: torch.Tensor,
              cfg: float = 0.0, prompt: torch.Tensor | None = None) -> torch.Tensor:
    """Logits (N, V) float32 at the N selected positions, in row-major order.

    tokens, positions, select, prompt (B, W); attention (B, 1, W, W) bool. Dream-style models (shifted
    logits) read position i's distribution from the output at i - 1 (position 0 from itself, as the authors'
    ``cat([logits[:, :1], logits[:, :-1]])``). With ``cfg > 0`` an unconditional copy with the ``prompt``
    positions masked runs beside it: ``un + (cfg + 1)(cond - un)``."""
    device = model.device
    tokens, positions, attention = tokens.to(device), positions.to(device), attention.to(device)
    guided = cfg > 0 and prompt is not None
    if guided:
        uncond = tokens.masked_fill(prompt.to(device), model.mask_id)
        tokens, positions, attention = torch.cat([tokens, uncond]), positions.repeat(2, 1), attention.repeat(2, 1, 1, 1)
    hidden = model.net.hidden_states(tokens, positions, attention)  # (B or 2B, W, H)
    rows, cols = select.nonzero(as_tuple=True)
    if model.arch.shift_logits:
        cols = (cols - 1).clamp(min=0)
    rows, cols = rows.to(device), cols.to(device)
    if guided:
        cond = model.net.lm_head(hidden[rows, cols]).float()
        un = model.net.lm_head(hidden[rows + select.shape[0], cols]).float()
        return un + (cfg + 1) * (cond - un)
    return model.net.lm_head(hidden[rows, cols]).float()


def pad_rows(rows: list[tuple[RowPlan, int]], pad_id: int) -> tuple[torch.Tensor, ...]:
    """(plan, row) pairs -> tokens, targets, scored, positions, prompt (B, W) and attention (B, 1, W, W),
    right-padded to the widest plan."""
    width = max(plan.width for plan, _ in rows)
    b = len(rows)
    tokens = torch.full((b, width), pad_id, dtype=torch.long)
    targets = torch.zeros((b, width), dtype=torch.long)
    scored = torch.zeros((b, width), dtype=torch.bool)
    prompt = torch.zeros((b, width), dtype=torch.bool)
    positions = torch.zeros((b, width), dtype=torch.long)
    attention = torch.eye(width, dtype=torch.bool).repeat(b, 1, 1, 1)
    for i, (plan, r) in enumerate(rows):
        w = plan.width
        tokens[i, :w], targets[i, :w], scored[i, :w], positions[i, :w] = (plan.tokens[r], plan.targets[r],
                                                                           plan.scored[r], plan.positions)
        if plan.prompt is not None:
            prompt[i, :w] = plan.prompt
        attention[i, 0, :w, :w] = True if plan.attention is None else plan.attention
    return tokens, targets, scored, positions, prompt, attention


def tokens_per_forward(model) -> int:
    return CPU_TOKENS_PER_FORWARD if model.device.type == "cpu" else GPU_TOKENS_PER_FORWARD


def score_rows(model, plans: list[RowPlan], cfg: float = 0.0) -> list[torch.Tensor]:
    """Each plan's per-token cross-entropy (R, W) float32 at its scored positions (0 elsewhere): every plan's
    rows, in order, through the network in forward batches of about :func:`tokens_per_forward` tokens."""
    out = [torch.zeros(p.tokens.shape, dtype=torch.float32) for p in plans]
    rows = [(i, r) for i, plan in enumerate(plans) for r in range(plan.rows)]
    budget = tokens_per_forward(model)
    start = 0
    while start < len(rows):
        width = plans[rows[start][0]].width
        stop = start + 1
        while stop < len(rows) and (stop - start + 1) * max(width, plans[rows[stop][0]].width) <= budget:
            width = max(width, plans[rows[stop][0]].width)
            stop += 1
        group = rows[start:stop]
        tokens, targets, scored, positions, prompt, attention = pad_rows([(plans[i], r) for i, r in group],
                                                                         model.pad_id)
        with torch.inference_mode():
            logits = logits_at(model, tokens, positions, attention, scored, cfg, prompt)
            nll = F.cross_entropy(logits, targets[scored].to(logits.device), reduction="none").cpu()
        filled = torch.zeros(scored.shape, dtype=torch.float32)
        filled[scored] = nll
        for j, (i, r) in enumerate(group):
            out[i][r] = filled[j, :plans[i].width]
        start = stop
    return out
