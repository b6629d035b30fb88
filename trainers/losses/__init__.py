"""Policy losses, a flat registry in verl's manner (``register_policy_loss``): one decorated function each.

A loss is ``fn(algorithm, policy, batch, inner_step) -> LossOutput`` (or an iterator of
:class:`~dare.trainers.batch.LossOutput` terms that the trainer backpropagates one at a time, BGPO). It reads
its settings from ``algorithm.config``, calls ``algorithm.estimator`` for log-likelihoods, and asks the
algorithm's hooks where one differs (``loss_mask``, ``reduce``). An algorithm names its loss once, in its
class (``policy_loss = "token_ppo"``); a plugin registers another with ``@policy_loss("pkg/name")``.

| loss | module | used by |
|---|---|---|
| ``token_ppo`` | :mod:`.ppo` | d1, Coupled-GRPO, DiPO, TraceRL, CJ-GRPO, JustGRPO |
| ``sequence_ppo`` / ``sequence_log_clip`` | :mod:`.sequence` | ESPO / EBPO |
| ``bgpo_bounds`` | :mod:`.bounds` | BGPO |
| ``sandwich`` | :mod:`.sandwich` | SPG |
| ``step_ppo`` | :mod:`.steps` | MDPO |
| ``segment_ppo`` | :mod:`.segment` | d-TreeRPO |
| ``dpo`` | :mod:`.preference` | DPO, VRPO |
| ``negative_elbo`` | :mod:`.elbo` | SFT |
| ``weighted_likelihood`` | :mod:`.weighted` | wd1 |
| ``draw_ppo`` | :mod:`.draws` | UniGRPO |
| ``denoiser_regression`` | :mod:`.regression` | GDSD |
| ``replay_pg`` | :mod:`.replay` | RLDF |
"""

from __future__ import annotations

from collections.abc import Callable

from dare.harness.errors import RegistryError
from dare.harness.registry import losses


def policy_loss(name: str, *, aliases: tuple[str, ...] = ()):
    """Function decorator: register a policy loss as ``name``."""

    def register(fn: Callable) -> Callable:
        if not callable(fn):
            raise RegistryError(f"policy loss {name!r} must be a function, got {fn!r}")
        losses.register(name, fn, aliases=aliases)
        return fn

    return register
