"""d-TreeRPO's tree rollout: one decoding per prompt, branched at chosen denoising steps.

The root is the fully masked canvas. It branches into ``trees`` children and every later node into ``branch``
children; each edge continues the parent's canvas for the steps up to the next branch point with the
engine's own decoder (``decode_window``: the evaluation's loop and commit rule, a generator per edge), so a
root-to-leaf path is an ordinary rollout of the decoding policy and the leaves are scored like any rollout.
Branch points, as DARE counts them (remaining steps): {T} ∪ {T - ⌊k T / s⌋ : k = 1..s} for T steps and
contraction s (T = 128, s = 2: 128, 64, 0). Nodes are numbered breadth first as DARE's
``DTreeRPORollout.generate_sequences`` inserts them (yjyddq/DARE@83ae8a3
verl/workers/rollout/dtreerpo_llada_rollout.py; ``_tree_generate_partial`` is the partial decode).

Rows of the returned batch are the tree's edges (segments), prompt-major then child node: the child's
canvas as the completion, counted (``completion_mask``) where the parent was masked, the child is not, up
to the child's first EOS; ``group_ids`` = one group per (prompt, parent). NFE: every edge runs its window's
forwards, so a prompt costs Σ_edges window steps (DARE's recipe: 4 x 64 + 16 x 64 = 1,280); a leaf records
its path's forwards (T). Shapes: P prompts, N nodes, G gen_length, E = P (N - 1) segments.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dare.harness.engine import request_seed
from dare.harness.errors import ConfigError
from dare.harness.options import capabilities
from dare.harness.records import DecodingConfig, Generation

from ..batch import RolloutBatch
from .data import left_pad, stop_mask


def branch_steps(steps: int, contraction: int) -> list[int]:
    """Elapsed decoding steps at which the tree branches, ascending from 0 to ``steps`` (DARE's points are
    the remaining steps {T} ∪ {T - ⌊k T / s⌋ : k = 1..s})."""
    remaining = {steps} | {steps - k * steps // contraction for k in range(1, contraction + 1)}
    return sorted(steps - r for r in remaining)


def tree_parents(trees: int, branch: int, levels: int) -> list[int]:
    """Parent of each node (-1 for the root), breadth first: the root's ``trees`` children, then ``branch``
    children of each node of a level in order, ``levels`` levels below the root."""
    parents, level = [-1], [0]
    for _ in range(levels):
        following = []
        for node in level:
            for _ in range(trees if node == 0 else branch):
                parents.append(node)
                following.append(len(parents) - 1)
        level = following
    return parents


@dataclass
class TreeSegments:
    """The tree behind a segment batch. parents: node -> parent (N,); leaves: leaf nodes in order (a prompt's
    leaves are its generations, in this order); prompt (E,) and child (E,) long: each row's prompt and child
    node; parent_ids (E, G): each row's parent canvas; windows: the levels' (start, stop) steps; step: the
    1-based training step (the self-distillation schedule reads it); values (P, N): the node values, once
    the leaves are scored."""

    parents: list[int]
    leaves: list[int]
    prompt: torch.Tensor
    child: torch.Tensor
    parent_ids: torch.Tensor
    windows: list[tuple[int, int]]
    step: int = 1
    values: torch.Tensor | None = None

    def node_values(self, leaf_rewards: torch.Tensor) -> torch.Tensor:
        """Values (P, N): leaves their rewards (P, n_leaves), every other node the mean of its children's
        values, bottom up (DARE's ``compute_dtreerpo_rewards_and_segments``; NaN rewards skipped)."""
        values = torch.full((leaf_rewards.shape[0], len(self.parents)), float("nan"), dtype=torch.float64)
        values[:, self.leaves] = leaf_rewards.double()
        for node in reversed(range(len(self.parents))):  # breadth-first order: children follow their parent
            children = [c for c, p in enumerate(self.parents) if p == node]
            if children:
                values[:, node] = values[:, children].nanmean(1)
        return values


def tree_rollout(engine, items, decoding: DecodingConfig, seed: int, trees: int, branch: int, contraction: int,
                 step: int = 1, trajectory: bool = False) -> tuple[RolloutBatch, list[Generation]]:
    """Decode one tree per item; returns the segment batch (``extras["tree"]``: :class:`TreeSegments`) and the
    leaves as generations, item-major (``trees * branch ** (levels - 1)`` per item). Edge seeds are
    ``request_seed(seed, sample id, node)``; ``trajectory`` keeps each edge's global commit steps."""
    if not capabilities(engine).decodes_windows:
        raise ConfigError(f"engine {engine.name!r} cannot continue a partial canvas, which d-TreeRPO's tree rollout "
                          "needs; use --engine torch")
    model = engine.model
    bounds = branch_steps(decoding.steps, contraction)
    windows = list(zip(bounds, bounds[1:]))
    parents = tree_parents(trees, branch, len(windows))
    prompts = [engine.prompt_ids(it.messages) for it in items]
    n_items, n_nodes, gen = len(items), len(parents), decoding.gen_length
    states = torch.full((n_items, n_nodes, gen), model.mask_id, dtype=torch.long)
    commit = torch.full((n_items, n_nodes, gen), -1, dtype=torch.long)
    nfe = torch.zeros(n_items, n_nodes, dtype=torch.long)
    level = [0]
    for window in windows:
        level = [c for c, p in enumerate(parents) if p in level]
        rows = [(i, c) for i in range(n_items) for c in level]
        out = engine.decode_window([prompts[i] for i, _ in rows],
                                   torch.stack([states[i, parents[c]] for i, c in rows]), window, decoding,
                                   [request_seed(seed, items[i].sample.id, c) for i, c in rows])
        for r, (i, c) in enumerate(rows):
            states[i, c], commit[i, c], nfe[i, c] = out.tokens[r].cpu(), out.commit_step[r].cpu(), out.nfe[r].cpu()
    leaves = [n for n in range(n_nodes) if n not in parents]
    gens = [_leaf_generation(model, items[i].sample.id, j, states[i, leaf], _path_nfe(parents, nfe[i], leaf),
                             decoding.stop_at_eos) for i in range(n_items) for j, leaf in enumerate(leaves)]
    prompt_rows = torch.arange(n_items).repeat_interleave(n_nodes - 1)
    child = torch.arange(1, n_nodes).repeat(n_items)
    parent = torch.tensor(parents)[child]
    child_ids, parent_ids = states[prompt_rows, child], states[prompt_rows, parent]
    counted = (parent_ids == model.mask_id) & (child_ids != model.mask_id) & stop_mask(child_ids, (model.eos_id,))
    p_ids, p_mask = left_pad([prompts[i] for i in prompt_rows.tolist()], model.pad_id)
    batch = RolloutBatch(prompt_ids=p_ids, prompt_mask=p_mask, completion_ids=child_ids, completion_mask=counted,
                         completion_attn=torch.ones_like(counted), group_ids=prompt_rows * n_nodes + parent,
                         commit_step=commit[prompt_rows, child] if trajectory else None)
    batch.extras["tree"] = TreeSegments(parents, leaves, prompt_rows, child, parent_ids, windows, step)
    return batch, gens


def _path_nfe(parents: list[int], nfe: torch.Tensor, node: int) -> int:
    """Forwards on the path from the root to ``node`` (one uninterrupted decode's worth)."""
    total = 0
    while node > 0:
        total, node = total + int(nfe[node]), parents[node]
    return total


def _leaf_generation(model, sample_id: str, index: int, tokens: torch.Tensor, nfe: int,
                     stop_at_eos: bool) -> Generation:
    """A leaf as the engine reports a decode: its text up to the first stop token when ``stop_at_eos``."""
    ids = tokens.tolist()
    stop = next((k for k, t in enumerate(ids) if t in model.stop_ids), None)
    shown = ids[:stop] if stop_at_eos and stop is not None else ids
    return Generation(sample_id=sample_id, index=index, text=model.tokenizer.decode(shown, skip_special_tokens=True),
                      token_ids=ids, finish_reason="stop" if stop is not None else "length", nfe=nfe)
