"""``tree_transition``: the exact one-step likelihood of a tree edge, log p(child | parent state).

d-TreeRPO (yjyddq/DARE@83ae8a3 verl/workers/actor/llada_dp_actor_dtreerpo.py
``_get_local_transition_logps``): one forward on the parent's canvas (prompt + partially decoded
completion); token_logp[i] = log p(y_i | parent) where the parent holds a mask and the child a token, 0
elsewhere. The parent canvas is the draw (``noise["parent"]``, (B, T) ids), which the algorithm supplies
from its tree rollout, so the old, reference and current passes score the same transitions.
"""

from __future__ import annotations

import torch

from dare.harness.errors import ConfigError

from ..api import Estimator, estimator
from ..batch import Estimate, RolloutBatch
from ..training.sequences import build_layout
from .masked import attention_mask


@estimator("tree_transition")
class TreeTransition(Estimator):
    """log p(child token | parent canvas) on the positions the edge decoded; one forward per segment."""

    forwards = 1

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        tree = batch.extras.get("tree")
        if tree is None:
            raise ConfigError("estimator 'tree_transition' scores the edges of a tree rollout; use it with "
                              "--algo d_treerpo")
        return {"parent": tree.parent_ids}

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        layout = build_layout(batch)
        parent = noise["parent"].to(layout.tokens.device)
        inputs = layout.tokens.clone()
        inputs[:, layout.response] = parent
        decoded = (parent == policy.mask_id) & (batch.completion_ids != policy.mask_id)
        targets = batch.completion_ids.masked_fill(~decoded, 0)  # a still-masked slot is no target
        logp, entropy = policy.token_logp(inputs, layout.positions, attention_mask(policy, layout),
                                          layout.response_index(), targets)
        return Estimate(logp * decoded, entropy)
