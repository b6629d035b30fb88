"""Does one update point uphill? One optimizer step of an algorithm on a fixed rollout batch, measured with the
exact likelihood of the decoding policy.

The rollout records its step map, so the log-probability the sampler gave each committed token, at the step
that committed it (the logits divided by the rollout temperature, as the sampler drew them), can be replayed
under any weights: ``mdm_trajectory`` / ``block_trajectory`` on a tempered policy. Summed over a row's
committed tokens it is the trajectory log-likelihood of that rollout under the decoding policy. The probe
runs the local trainer's own step (its rollout decoding and algorithm additions, rewards, ``prepare``, noise,
old / reference log-probs, advantages, the update with its AdamW and clipping), with three changes only:
the rollout records the step map for every algorithm (an algorithm that does not replay it never sees it),
the rollouts are decoded once per decoding setting and reused, and ``flip`` negates every reward (the
batch's and, for MDPO, those of the intermediate predictions), which negates every group-centred advantage.

Before and after the update it replays the trajectory log-likelihood ℓ of every row; the result gives
Δℓ per row, the advantages, and the algorithm's own estimate of each row's log-likelihood before the
update (its estimator summed over the counted tokens, averaged over the noise sets), to rank against ℓ.

    python benchmarks/uphill.py          # the table in trainers/README.md, "Does the update point uphill?"
"""

from __future__ import annotations

import functools
import math
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from ..api import Algorithm, build_estimator
from ..batch import RolloutBatch
from ..training import trainer as trainer_module
from ..training.config import TrainConfig
from ..training.data import train_items
from ..training.rollout import batch_from_generations, rollout_requests
from ..training.trainer import LocalTrainer

#: the RL algorithms and the model families their paper allows (sft and the preference ones left out)
FAMILIES = {"tiny-llada": "bidirectional", "tiny-sdar": "block_causal"}
CASES = [("d1", "tiny-llada"), ("coupled_grpo", "tiny-llada"), ("mdpo", "tiny-llada"), ("cj_grpo", "tiny-llada"),
         ("spg", "tiny-llada"), ("bgpo", "tiny-llada"), ("espo", "tiny-llada"), ("just_grpo", "tiny-llada"),
         ("d1", "tiny-sdar"), ("coupled_grpo", "tiny-sdar"), ("cj_grpo", "tiny-sdar"), ("bgpo", "tiny-sdar"),
         ("ebpo", "tiny-sdar"), ("dipo", "tiny-sdar"), ("trace_rl", "tiny-sdar"), ("d_treerpo", "tiny-llada"),
         ("wd1", "tiny-llada"), ("wd1", "tiny-sdar"), ("unigrpo", "tiny-llada"),
         ("gdsd", "tiny-llada"), ("rldf", "tiny-llada")]

#: the probe's setting: 4 prompts x 4 samples at temperature 2 (the shipped tiny models solve nearly every
#: Sudoku at T <= 1, so the rewards would all be equal), one AdamW update at LR
PROMPTS, GROUP, TEMPERATURE, LR = 4, 4, 2.0, 1e-4
#: decoding overrides: tiny-llada decodes its 32-token canvas in 8 steps of 4 tokens (the replay costs one
#: full-canvas forward per step); tiny-sdar keeps its default (blocks of 4, one token per step)
DECODING: dict[str, dict[str, Any]] = {"tiny-llada": {"steps": 8}}
_GENERATIONS: dict[tuple, list] = {}  # rollouts per (model, decoding, seed, prompts): decoded once
_train_items = functools.lru_cache(maxsize=None)(train_items)  # 20000 Sudoku rows parsed once, not per trainer


class TemperedPolicy:
    """A policy whose log-probabilities divide the logits by ``temperature`` (the rollout sampler's)."""

    def __init__(self, policy, temperature: float):
        self.policy, self.temperature = policy, float(temperature)

    def __getattr__(self, name: str):
        return getattr(self.policy, name)

    def token_logp(self, *args, temperature: float = 1.0, **kwargs):
        return self.policy.token_logp(*args, temperature=temperature * self.temperature, **kwargs)


@torch.no_grad()
def trajectory_token_logp(policy, batch: RolloutBatch, temperature: float) -> torch.Tensor:
    """(B, T) log p_T(y_i | the state before the step that committed y_i) of every committed token (0 elsewhere),
    replayed from ``batch.commit_step``; float64 on the CPU."""
    name = "mdm_trajectory" if policy.block_size is None else "block_trajectory"
    options = {"steps_per_forward": 32} if name == "mdm_trajectory" else {}
    token = build_estimator(name, options).estimate(TemperedPolicy(policy, temperature), batch, {}).token_logp
    return (token * (batch.commit_step >= 0)).double().cpu()


def trajectory_logp(policy, batch: RolloutBatch, temperature: float) -> torch.Tensor:
    """(B,) the trajectory log-likelihood of each row under the decoding policy at ``temperature``."""
    return trajectory_token_logp(policy, batch, temperature).sum(1)


@dataclass
class Uphill:
    """One update measured. Per row: the advantage A the algorithm trained on, per-token trajectory
    log-likelihoods (B, T) before and after the update (at the rollout temperature; ``before_t1_tokens`` at
    temperature 1, when asked for), the tokens the algorithm counts (``counted``, its completion mask) and its
    own likelihood estimate before the update (``proxy``; None where it estimates none of the completion: MDPO)."""

    algorithm: str
    model: str
    flipped: bool
    lr: float
    temperature: float
    estimator: str
    advantages: torch.Tensor
    before_tokens: torch.Tensor
    after_tokens: torch.Tensor
    before_t1_tokens: torch.Tensor | None
    counted: torch.Tensor
    proxy: torch.Tensor | None
    groups: torch.Tensor
    metrics: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    held_out: dict[str, Any] = field(default_factory=dict)  # the held-out rows a subclass of the probe measured

    @property
    def before(self) -> torch.Tensor:
        """(B,) ℓ before the update: the whole trajectory, every committed token."""
        return self.before_tokens.sum(1)

    @property
    def after(self) -> torch.Tensor:
        return self.after_tokens.sum(1)

    @property
    def delta(self) -> torch.Tensor:
        return self.after - self.before

    def exact_counted(self, t1: bool = False) -> torch.Tensor:
        """(B,) ℓ before the update over the tokens the algorithm counts (what its estimate covers)."""
        tokens = self.before_t1_tokens if t1 else self.before_tokens
        return (tokens * self.counted).sum(1)

    @property
    def rollout_advantages(self) -> torch.Tensor:
        """The advantages of the rollouts' true rewards (the algorithm saw their negation when ``flipped``)."""
        return -self.advantages if self.flipped else self.advantages

    def mean_delta(self, sign: int) -> float:
        """Mean Δℓ over the rows whose true advantage has ``sign``."""
        a = self.rollout_advantages
        rows = a > 0 if sign > 0 else a < 0
        return float(self.delta[rows].mean()) if rows.any() else math.nan

    @property
    def gap(self) -> float:
        """mean Δℓ over rows with true A > 0 minus mean Δℓ over rows with true A < 0: > 0 when the update
        points uphill; a flipped update (trained on -A) should give < 0."""
        return self.mean_delta(+1) - self.mean_delta(-1)


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman's rank correlation (ties get their mean rank)."""
    def ranks(v: torch.Tensor) -> torch.Tensor:
        v = v.double()
        out = torch.empty_like(v)
        for i, value in enumerate(v):
            out[i] = (v < value).sum() + ((v == value).sum() + 1) / 2
        return out

    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float((rx * ry).sum() / ((rx.square().sum() * ry.square().sum()).sqrt() + 1e-300))


class _ProbeTrainer(LocalTrainer):
    """The local trainer with the probe's three changes (step map always recorded, rollouts reused, flip)."""

    flip = False
    at_t1 = False

    def _engine(self, engine_cls, path, device, dtype):
        from dare.harness.engine import EngineContext

        ctx = EngineContext(model_name=self.model_name, model_spec=self.spec, model_path=path, device=device,
                            options={"dtype": dtype, "record_trajectory": True})
        return engine_cls(ctx)

    def _rollout(self, items, seed, count_padding):
        decoding = self.rollout_decoding
        if type(self.algorithm).rollout is not Algorithm.rollout:  # d-TreeRPO's trees: rows are edges, ℓ per edge
            self.recorded, gens = self.algorithm.rollout(self.rollout_engine, items, decoding, seed, self._step,
                                                         count_padding, True)
            return (self.recorded if self.needs.trajectory else replace(self.recorded, commit_step=None)), gens
        key = (str(self.base_path), decoding.config_hash(), seed, tuple(it.sample.id for it in items))
        if key not in _GENERATIONS:
            _GENERATIONS[key] = self.rollout_engine.generate(rollout_requests(items, decoding, seed), decoding)
        gens = _GENERATIONS[key]
        full = batch_from_generations(self.rollout_engine, items, decoding, gens, count_padding, trajectory=True)
        self.recorded = full
        return (full if self.needs.trajectory else replace(full, commit_step=None)), gens

    def _batch(self, step, timer, row):
        batch = super()._batch(step, timer, row)
        if self.flip and batch.rewards is not None:
            batch.rewards = -batch.rewards
        return batch

    def _scorer(self, step):
        scorer = super()._scorer(step)
        return (lambda rows, completions: -scorer(rows, completions)) if self.flip else scorer

    def _update(self, batch):
        recorded = replace(self.recorded, commit_step=self.recorded.commit_step.to(batch.completion_ids.device))
        temperature = self.rollout_decoding.temperature
        self.probe = {"batch": batch, "before": trajectory_token_logp(self.policy, recorded, temperature),
                      "before_t1": trajectory_token_logp(self.policy, recorded, 1.0) if self.at_t1 else None}
        out = super()._update(batch)
        self.probe["after"] = trajectory_token_logp(self.policy, recorded, temperature)
        return out


def sequence_advantages(batch: RolloutBatch) -> torch.Tensor:
    """The algorithm's per-row advantages; MDPO has per-step ones only, so its rows are split by the reward
    centred on the group mean (the sign of the final completion's advantage)."""
    if batch.advantages is not None:
        return batch.advantages.double().cpu()
    rewards, groups = batch.rewards.double().cpu(), batch.group_ids.cpu()
    means = torch.stack([rewards[groups == g].mean() for g in groups])
    return rewards - means


def proxy_logp(batch: RolloutBatch, estimator: str) -> torch.Tensor | None:
    """The algorithm's own likelihood estimate per row before the update (mean over noise sets of the token
    estimates summed over the counted tokens, copies averaged); None for MDPO's predictions of x̂0_t."""
    if batch.old_logp is None or estimator == "step_prediction":
        return None
    estimate = batch.old_logp.mean(0)
    if estimate.dim() == 3:  # estimators that score copies or steps separately (B, m, T): their mean
        estimate = estimate.mean(1)
    return (estimate * batch.completion_mask).sum(1).double().cpu()


def settings(algorithm: str, model: str, lr: float = LR, seed: int = 0, prompts: int = PROMPTS, group: int = GROUP,
             temperature: float = TEMPERATURE, overrides: dict[str, Any] | None = None,
             model_path: str | None = None, decoding: dict[str, Any] | None = None,
             first_inner_only: bool = True) -> TrainConfig:
    """The probe's run: one step, one inner update (the algorithm's own with ``first_inner_only=False``),
    ``prompts`` x ``group`` rollouts at ``temperature``; ``overrides``: more algorithm settings;
    ``model_path``: other weights of ``model``; ``decoding``: the evaluation's fields (default: the probe's)."""
    algo: dict[str, Any] = {**({"inner_steps": 1} if first_inner_only else {}), **(overrides or {})}
    rollout: dict[str, Any] = {"temperature": temperature}
    if algorithm in ("mdpo", "just_grpo"):  # they sample at their own temperature: set it there
        algo["temperature"], rollout = temperature, {}
    return TrainConfig(algorithm=algorithm, algorithm_settings=algo, suite="sudoku", model=model, steps=1,
                       prompts_per_step=prompts, group_size=group, micro_batch_size=prompts * group, lr=lr,
                       seed=seed, decoding=DECODING.get(model, {}) if decoding is None else decoding,
                       rollout_decoding=rollout, evaluate=False, device="cpu", save_every=1,
                       **({"model_path": model_path} if model_path else {}))


def measure(algorithm: str, model: str, *, flip: bool = False, lr: float = LR, seed: int = 0, prompts: int = PROMPTS,
            group: int = GROUP, temperature: float = TEMPERATURE, overrides: dict[str, Any] | None = None,
            at_t1: bool = False, run_dir: Path | None = None, config: TrainConfig | None = None,
            trainer_cls: type[LocalTrainer] | None = None) -> Uphill:
    """One probe: build the trainer, run its first step, return the measured :class:`Uphill`. ``config``
    replaces :func:`settings`' run; ``trainer_cls``: a subclass of the probe's trainer."""
    began = time.perf_counter()
    config = config or settings(algorithm, model, lr, seed, prompts, group, temperature, overrides)
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(trainer_module, "train_items", _train_items):
        trainer = (trainer_cls or _ProbeTrainer)(config, Path(run_dir or tmp))
        trainer.flip, trainer.at_t1 = flip, at_t1
        row = trainer.step(0)
        trainer.verifiers.close()
    probe, batch = trainer.probe, trainer.probe["batch"]
    return Uphill(algorithm=algorithm, model=model, flipped=flip, lr=config.lr,
                  temperature=trainer.rollout_decoding.temperature, estimator=trainer.estimator.name,
                  advantages=sequence_advantages(batch), before_tokens=probe["before"],
                  after_tokens=probe["after"], before_t1_tokens=probe["before_t1"],
                  counted=batch.completion_mask.cpu(), proxy=proxy_logp(batch, trainer.estimator.name),
                  groups=batch.group_ids.cpu(),
                  metrics={k: v for k, v in row.items() if isinstance(v, (int, float))},
                  seconds=time.perf_counter() - began, held_out=probe.get("held_out", {}))
