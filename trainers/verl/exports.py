"""Our algorithms' advantage estimators in verl's own registry (``register_adv_est``).

For every registered algorithm that forms advantages, ``dare_<name>`` (``/`` becomes ``_``) is a verl
advantage estimator: it reads verl's call convention (``token_level_rewards`` (B, R),
``response_mask`` (B, R), ``index`` = the GRPO group uid per row), builds the :class:`RolloutBatch`
view the plugin needs (sequence rewards and group ids), calls ``algorithm.advantages`` with its default
config and returns ``(advantages, returns)`` broadcast over the response, both (B, R). Our own driver
calls ``algorithm.advantages`` directly; this export lets verl's trainers use our estimators.

Likelihood estimators and losses are *not* exported through ``register_policy_loss``: that hook gets one
precomputed per-token log-prob tensor, while our losses run several masked forwards themselves.
"""

from __future__ import annotations

import torch

from dare.harness.registry import algorithms

from ..api import build_algorithm
from ..batch import RolloutBatch

_EXPORTED: dict[str, object] = {}  # verl raises when a name is re-registered to a new function object


def verl_name(algorithm: str) -> str:
    return "dare_" + algorithm.replace("/", "_")


def _view(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index) -> RolloutBatch:
    rows = token_level_rewards.shape[0]
    uids = {uid: i for i, uid in enumerate(dict.fromkeys(index.tolist() if hasattr(index, "tolist") else index))}
    group_ids = torch.tensor([uids[u] for u in (index.tolist() if hasattr(index, "tolist") else index)])
    empty = torch.zeros(rows, 1, dtype=torch.long)
    return RolloutBatch(prompt_ids=empty, prompt_mask=empty.bool(), completion_ids=empty,
                        completion_mask=response_mask.bool(), completion_attn=response_mask.bool(),
                        group_ids=group_ids, rewards=token_level_rewards.sum(-1).float())


def _estimator(algorithm_name: str):
    algo = build_algorithm(algorithm_name)

    def estimate(token_level_rewards, response_mask, index=None, config=None, **_):
        if index is None:
            index = list(range(token_level_rewards.shape[0]))  # no groups given: every row its own group
        adv = algo.advantages(_view(token_level_rewards, response_mask, index))
        adv = adv.to(token_level_rewards.dtype)[:, None] * response_mask
        return adv, adv

    estimate.__name__ = verl_name(algorithm_name)
    return estimate


def register_with_verl() -> list[str]:
    """Register ``dare_<algo>`` for every algorithm with advantages; idempotent. Returns the names."""
    from verl.trainer.ppo.core_algos import register_adv_est

    from dare.trainers import plugin  # noqa: F401  (the built-in algorithms)

    names = []
    for name in algorithms.names():
        cls = algorithms.get(name)
        if not cls.needs.rollout or name != cls.name:  # supervised (no advantages) or an alias
            continue
        key = verl_name(name)
        if key not in _EXPORTED:
            _EXPORTED[key] = register_adv_est(key)(_estimator(name))
        names.append(key)
    return names
