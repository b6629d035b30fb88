"""The in-process tensor records of training: :class:`RolloutBatch`, :class:`Estimate`, :class:`LossOutput`.

Shapes: B sequences (prompts x samples per prompt), P prompt width (left-padded), T completion length,
S noise sets (one per inner step when the algorithm redraws its masks, else 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch


@dataclass
class RolloutBatch:
    """Everything the likelihood estimators and losses read; one row per (prompt, sample).

    prompt_ids (B, P) long, left-padded with the pad id; prompt_mask (B, P) bool, True on real prompt tokens.
    completion_ids (B, T) long: generated (or reference) tokens, the full canvas including any tail after EOS.
    completion_mask (B, T) bool: tokens counted in likelihoods and losses.
    completion_attn (B, T) bool: tokens present as attention keys (False only for right padding that the
        model must not see, e.g. SFT batches of block-diffusion models).
    group_ids (B,) long: rows with the same id answer the same prompt (GRPO groups).
    rewards (B,) float, advantages (B,) float: None for supervised batches.
    old_logp / ref_logp (S, B, T) float: per-token estimates under the behaviour / reference policy.
    rollout_logp (B, T) float: the same estimate computed by the rollout engine's copy of the model.
    commit_step (B, T) long: decoding step at which each token was committed (-1 never); trajectories only.
    noise: S dicts of estimator draws (tensors with batch dimension first), shared by old, new and ref passes.
    extras: algorithm-private values; not sliced by :meth:`select` nor moved by :meth:`to`.
    """

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    completion_attn: torch.Tensor
    group_ids: torch.Tensor
    rewards: torch.Tensor | None = None
    advantages: torch.Tensor | None = None
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    rollout_logp: torch.Tensor | None = None
    commit_step: torch.Tensor | None = None
    noise: list[dict[str, torch.Tensor]] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.prompt_ids.shape[0]

    def select(self, rows: torch.Tensor | slice) -> RolloutBatch:
        """The sub-batch of ``rows`` (micro-batching); every per-row tensor is sliced, S-major ones on dim 1."""
        changes: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                changes[f.name] = value[:, rows] if f.name in ("old_logp", "ref_logp") else value[rows]
        changes["noise"] = [{k: v[rows] for k, v in draw.items()} for draw in self.noise]
        return replace(self, **changes)

    def to(self, device: torch.device | str) -> RolloutBatch:
        changes = {f.name: getattr(self, f.name).to(device) for f in fields(self)
                   if isinstance(getattr(self, f.name), torch.Tensor)}
        changes["noise"] = [{k: v.to(device) for k, v in draw.items()} for draw in self.noise]
        return replace(self, **changes)


@dataclass
class Estimate:
    """A likelihood estimator's output. token_logp (B, T): per-token contributions whose sum over
    ``completion_mask`` is the sequence estimate; entropy (B, T): predictive entropy (detached) or None."""

    token_logp: torch.Tensor
    entropy: torch.Tensor | None = None


@dataclass
class LossOutput:
    """A micro-batch loss. ``loss`` is already normalised by ``weight`` (e.g. its token count); the trainer
    combines micro-batches as sum(loss * weight) / sum(weight), so accumulation equals one big batch."""

    loss: torch.Tensor
    weight: float = 1.0
    metrics: dict[str, float] = field(default_factory=dict)
