"""Many requests' rows through the network in shared forward batches, and the logits at chosen positions.

Rows of equal width share a forward batch whichever request they come from: no row is padded, so a row's
logits are computed alike whatever else is scored with it (padded rows of mixed widths differ from their
unpadded selves in the last bits, through the attention's reductions). A row's logits depend only on its
input (tokens, positions, attention, and under guidance the prompt its unconditional copy masks), so each
distinct input runs once for every row of every request that has it, each row then scored against its own
targets: a request's repeated masks, and the choices of one question whose rows coincide (MMLU's one-token
answers " A" to " D" after one context are one row). Only the positions a plan scores reach the LM head. The
greedy check (masked.py) groups its canvases by width the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

import torch
import torch.nn.functional as F

from dare.backends.decoding.mdm import CPU_TOKENS_PER_FORWARD

from .base import RowPlan

T = TypeVar("T")

#: on a GPU, rows go through the network in groups of about this many tokens (logits stay a few GB at a
#: 126k vocabulary because only scored positions reach the LM head)
GPU_TOKENS_PER_FORWARD = 16384


#: matrix products of fewer rows take other CPU kernels (small-M paths whose sums round differently: 1-3 rows on
#: one thread, up to 11 on two, measured on torch 2.13), so every product here gets at least this many rows and a
#: row's value does not depend on how many rows share its forward. That holds on one or two threads; on more,
#: ATen splits its kernels' work by tensor size and the last bits can move with the batch (docs/ARCHITECTURE.md).
MIN_GEMM_ROWS = 16


def logits_at(model, tokens: torch.Tensor, positions: torch.Tensor, attention: torch.Tensor, select: torch.Tensor,
              cfg: float = 0.0, prompt: torch.Tensor | None = None) -> torch.Tensor:
    """Logits (N, V) float32 at the N selected positions, in row-major order.

    tokens, positions, select, prompt (B, W); attention (B, 1, W, W) bool, or None (every key). Dream-style
    models (shifted logits) read position i's distribution from the output at i - 1 (position 0 from itself, as
    the authors' ``cat([logits[:, :1], logits[:, :-1]])``). With ``cfg > 0`` an unconditional copy with the ``prompt``
    positions masked runs beside it: ``un + (cfg + 1)(cond - un)``."""
    device = model.device
    tokens, positions = tokens.to(device), positions.to(device)
    attention = None if attention is None else attention.to(device)
    guided = cfg > 0 and prompt is not None
    if guided:
        uncond = tokens.masked_fill(prompt.to(device), model.mask_id)
        tokens, positions = torch.cat([tokens, uncond]), positions.repeat(2, 1)
        attention = None if attention is None else attention.repeat(2, 1, 1, 1)
    spare = max(0, -(-MIN_GEMM_ROWS // tokens.shape[1]) - tokens.shape[0])  # copies of row 0, dropped after
    if spare:
        tokens, positions = (torch.cat([t, t[:1].expand(spare, -1)]) for t in (tokens, positions))
        attention = None if attention is None else torch.cat([attention, attention[:1].expand(spare, -1, -1, -1)])
    hidden = model.net.hidden_states(tokens, positions, attention)  # (B or 2B, W, H), spare rows last
    rows, cols = select.nonzero(as_tuple=True)
    if model.arch.shift_logits:
        cols = (cols - 1).clamp(min=0)
    rows, cols = rows.to(device), cols.to(device)
    if guided:
        cond = lm_head(model, hidden[rows, cols])
        un = lm_head(model, hidden[rows + select.shape[0], cols])
        return un + (cfg + 1) * (cond - un)
    return lm_head(model, hidden[rows, cols])


def lm_head(model, hidden: torch.Tensor) -> torch.Tensor:
    """Logits (N, V) float32 of hidden states (N, H), through a product of at least MIN_GEMM_ROWS rows."""
    n = hidden.shape[0]
    if n < MIN_GEMM_ROWS:
        hidden = torch.cat([hidden, hidden.new_zeros(MIN_GEMM_ROWS - n, hidden.shape[1])])
    return model.net.lm_head(hidden)[:n].float()


def stack_rows(rows: list[tuple[RowPlan, int]]) -> tuple[torch.Tensor, ...]:
    """(plan, row) pairs of one width W -> tokens, targets, scored, positions, prompt (B, W) and attention
    (B, 1, W, W), or None when every plan has full attention."""
    plans = [plan for plan, _ in rows]
    width = plans[0].width
    assert all(plan.width == width for plan in plans), "rows of one forward share a width (never padded)"
    tokens, targets, scored = (torch.stack([getattr(plan, name)[r] for plan, r in rows])
                               for name in ("tokens", "targets", "scored"))
    positions = torch.stack([plan.positions for plan in plans])
    prompt = torch.stack([torch.zeros(width, dtype=torch.bool) if plan.prompt is None else plan.prompt
                          for plan in plans])
    if all(plan.attention is None for plan in plans):
        return tokens, targets, scored, positions, prompt, None
    full = torch.ones((width, width), dtype=torch.bool)
    attention = torch.stack([full if plan.attention is None else plan.attention for plan in plans])[:, None]
    return tokens, targets, scored, positions, prompt, attention


def width_groups(items: list[T], width: Callable[[T], int], budget: int) -> list[list[T]]:
    """``items`` (sorted by width) cut into runs of one width of at most ``budget`` tokens (one item at least):
    the forward batches, never padded."""
    groups: list[list[T]] = []
    for item in items:
        if groups and width(groups[-1][0]) == width(item) and (len(groups[-1]) + 1) * width(item) <= budget:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def tokens_per_forward(model, cfg: float = 0.0) -> int:
    """Tokens of the rows grouped into one forward: under guidance each row runs twice (its unconditional copy), so
    half as many rows keep the forward at the size that runs fastest (on a CPU, guided ARC-like rows took 22% less
    time in groups of 256 tokens than of 512; values are the same either way)."""
    budget = CPU_TOKENS_PER_FORWARD if model.device.type == "cpu" else GPU_TOKENS_PER_FORWARD
    return budget // 2 if cfg > 0 else budget


def distinct_rows(plan: RowPlan) -> tuple[torch.Tensor, torch.Tensor]:
    """(first (U,), inverse (R,)): the first row of each distinct (tokens, scored) row of ``plan`` and, per row,
    which distinct row it is. Short targets repeat masks often (a one-token target: every row is one row), and
    a row's losses depend on nothing else, so each distinct row runs once."""
    if plan.rows == 0:
        return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    key = torch.cat([plan.tokens, plan.scored.long()], dim=1)
    distinct, inverse = torch.unique(key, dim=0, return_inverse=True)
    first = torch.full((len(distinct),), plan.rows, dtype=torch.long)
    return first.scatter_reduce(0, inverse, torch.arange(plan.rows), reduce="amin"), inverse


def layout_key(plan: RowPlan, cfg: float) -> bytes:
    """What a plan's rows share besides their tokens and scored positions: the width, positions, attention and,
    under guidance, the prompt (the unconditional copy masks it). Rows of two plans with one layout key and
    equal tokens and scored positions have the same logits."""
    parts = [str(plan.width).encode(), plan.positions.numpy().tobytes(),
             b"" if plan.attention is None else plan.attention.numpy().tobytes(),
             plan.prompt.numpy().tobytes() if cfg > 0 and plan.prompt is not None else b""]
    return hashlib.blake2b(b"|".join(parts), digest_size=16).digest()


def shared_inputs(plans: list[RowPlan], firsts: list[torch.Tensor],
                  cfg: float) -> tuple[list[tuple[int, int]], list[list[tuple[int, int]]]]:
    """(inputs, users): the distinct row inputs among each plan's distinct rows (``firsts``, from
    :func:`distinct_rows`), each as the (plan, row) that runs it, and per input every (plan, row) scored from its
    logits."""
    slots: dict[tuple[bytes, bytes], int] = {}
    inputs: list[tuple[int, int]] = []
    users: list[list[tuple[int, int]]] = []
    for i, (plan, first) in enumerate(zip(plans, firsts)):
        layout = layout_key(plan, cfg)
        for r in first.tolist():
            key = (layout, plan.tokens[r].numpy().tobytes() + plan.scored[r].numpy().tobytes())
            if key not in slots:
                slots[key] = len(inputs)
                inputs.append((i, r))
                users.append([])
            users[slots[key]].append((i, r))
    return inputs, users


def score_rows(model, plans: list[RowPlan], cfg: float = 0.0) -> list[torch.Tensor]:
    """Each plan's per-token cross-entropy (R, W) float32 at its scored positions (0 elsewhere): the distinct
    row inputs of all plans (:func:`shared_inputs`), grouped by width, through the network in forward batches of
    about :func:`tokens_per_forward` tokens; each row's scored logits against its own targets."""
    distinct = [distinct_rows(plan) for plan in plans]
    inputs, users = shared_inputs(plans, [first for first, _ in distinct], cfg)
    out = [torch.zeros(p.scored.shape, dtype=torch.float32) for p in plans]
    order = sorted(range(len(inputs)), key=lambda s: plans[inputs[s][0]].width)  # stable within a width
    for group in width_groups(order, lambda s: plans[inputs[s][0]].width, tokens_per_forward(model, cfg)):
        tokens, _, scored, positions, prompt, attention = stack_rows([(plans[i], r) for i, r in
                                                                      (inputs[s] for s in group)])
        starts = torch.cat([torch.zeros(1, dtype=torch.long), scored.sum(1).cumsum(0)]).tolist()
        users_of = [(range(starts[j], starts[j + 1]), i, r) for j, s in enumerate(group) for i, r in users[s]]
        targets = torch.cat([plans[i].targets[r][plans[i].scored[r]] for _, i, r in users_of])
        with torch.inference_mode():
            logits = logits_at(model, tokens, positions, attention, scored, cfg, prompt)  # (N, V)
            if len(users_of) > len(group):  # an input with several users: its logits once per user
                logits = logits[torch.tensor([n for span, _, _ in users_of for n in span], device=logits.device)]
            nll = F.cross_entropy(logits, targets.to(logits.device), reduction="none").cpu()
        for (_, i, r), part in zip(users_of, nll.split([len(span) for span, _, _ in users_of])):
            out[i][r][plans[i].scored[r]] = part
    return [computed[first][inverse] for computed, (first, inverse) in zip(out, distinct)]
