"""Advantage estimators, a flat registry in verl's manner (``register_adv_est``): one decorated function each.

``fn(rewards (B,), group_ids (B,), eps) -> advantages (B,)``; rows with the same group id answer the same
prompt. An algorithm names its estimator in its config (``advantage: grpo``), so ``--set algo.advantage=rloo``
swaps it; a plugin registers another with ``@advantage("pkg/name")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import torch
from pydantic import AfterValidator

from dare.harness.errors import RegistryError
from dare.harness.registry import advantages, did_you_mean


def advantage(name: str, *, aliases: tuple[str, ...] = ()):
    """Function decorator: register an advantage estimator as ``name``."""

    def register(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        if not callable(fn):
            raise RegistryError(f"advantage estimator {name!r} must be a function, got {fn!r}")
        advantages.register(name, fn, aliases=aliases)
        return fn

    return register


def _known(name: str) -> str:
    if name not in advantages:
        raise ValueError(f"unknown advantage estimator {name!r}{did_you_mean(name, advantages.names())} "
                         f"(available: {', '.join(advantages.names())})")
    return name


AdvantageName = Annotated[str, AfterValidator(_known)]
"""A config field naming a registered advantage estimator (checked when the config is validated)."""


def compute(name: str, rewards: torch.Tensor, group_ids: torch.Tensor, eps: float) -> torch.Tensor:
    """The registered estimator ``name`` applied to ``rewards`` (B,) grouped by ``group_ids`` (B,)."""
    return advantages.get(name)(rewards, group_ids, eps)


def _group_stats(rewards: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row group size (B,), group mean (B,) and unbiased group std (B,) (std 1 for size-1 groups)."""
    _, inverse = torch.unique(group_ids, return_inverse=True)
    n_groups = int(inverse.max()) + 1 if inverse.numel() else 0
    r = rewards.double()
    zeros = torch.zeros(n_groups, dtype=torch.double, device=r.device)
    count = zeros.index_add(0, inverse, torch.ones_like(r))
    total = zeros.index_add(0, inverse, r)
    mean = total / count
    sq = zeros.index_add(0, inverse, (r - mean[inverse]) ** 2)
    std = torch.where(count > 1, (sq / (count - 1).clamp(min=1)).sqrt(), torch.ones_like(count))
    return count[inverse], mean[inverse], std[inverse]


@advantage("grpo")
def grpo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """(r - mean_g) / (std_g + eps) with the unbiased std; a group of one has mean 0 and std 1 (verl)."""
    count, mean, std = _group_stats(rewards, group_ids)
    mean = torch.where(count > 1, mean, torch.zeros_like(mean))
    return ((rewards.double() - mean) / (std + eps)).to(rewards.dtype)


@advantage("mean_baseline")
def mean_baseline_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """r - mean_g (Dr.GRPO, d1 original): no division by the std."""
    _, mean, _ = _group_stats(rewards, group_ids)
    return (rewards.double() - mean).to(rewards.dtype)


@advantage("rloo")
def rloo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Leave-one-out baseline r_j - mean_{k != j} r_k (DiffuCoder, ESPO); 0 for a group of one."""
    count, mean, _ = _group_stats(rewards, group_ids)
    r = rewards.double()
    loo = torch.where(count > 1, (r - mean) * count / (count - 1).clamp(min=1), torch.zeros_like(r))
    return loo.to(rewards.dtype)


@advantage("population")
def population_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """(r - mean_g) / std_g with the population (n) std and no eps; 0 where std_g = 0 (DiRL's
    ``z_score_normalize``, OpenMOSS/DiRL train/rollout_dapo_server.py). ``eps`` is unused."""
    count, mean, std = _group_stats(rewards, group_ids)
    pop = std * ((count - 1).clamp(min=0) / count).sqrt()  # unbiased -> population std
    r = rewards.double()
    return torch.where(pop > 0, (r - mean) / pop.clamp(min=1e-300), torch.zeros_like(r)).to(rewards.dtype)
