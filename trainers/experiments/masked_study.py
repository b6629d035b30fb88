"""Why masked-diffusion RL does not lift tiny-llada after 550 SFT steps: the measurements behind
trainers/README.md ("Masked diffusion at this scale").

Everything at the masked comparison's own step (``compare_sudoku_masked``: 4 prompts x 8 rollouts at
temperature 1, the start's full-canvas decoding, lr 3e-5, each algorithm's own inner updates), from its start:

- per training step, the share of groups whose rewards are all equal (a group-centred advantage of 0 for all
  eight rows) under the partial-credit reward the runs train on, and under exact solving (``metrics.jsonl``:
  ``zero_variance_groups``, ``zero_variance_groups_solved``);
- the exact trajectory log-likelihood ℓ of the decoding policy (:mod:`.uphill`) of the rollouts above and below
  their group's mean reward, before and after one training step, on the step's own batch and on held-out
  batches (the prompts of the next steps, decoded by the same weights and not trained on): does what the
  step learns on four puzzles carry to others?
- how the algorithm's own estimate ranks the step's rollouts against ℓ (Spearman).

    python benchmarks/masked_study.py --start RUN/start/train/checkpoints/step-000550 --runs RUN/runs
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from ..training.config import TrainConfig
from ..training.data import batch_indices
from ..training.rollout import score
from .uphill import Uphill, _ProbeTrainer, measure, settings, trajectory_logp

#: the masked comparison's step (configs/experiments/compare_sudoku_masked.yaml)
PROMPTS, GROUP, TEMPERATURE, LR = 4, 8, 1.0, 3e-5
#: held-out batches: the prompts of steps 1..HELD_OUT of the same seed (the probe trains on step 0's)
HELD_OUT = 4


def centred(rewards: torch.Tensor, k: int) -> torch.Tensor:
    """(B,) each reward minus its group's mean (rows in prompt order, ``k`` per prompt)."""
    groups = rewards.double().view(-1, k)
    return (groups - groups.mean(1, keepdim=True)).view(-1)


class _HeldOutProbe(_ProbeTrainer):
    """The probe's trainer that also decodes the held-out batches and replays their ℓ around the update."""

    def _update(self, batch):
        cfg, k = self.config, self.rollout_decoding.num_samples
        trained, temperature = self.recorded, self.rollout_decoding.temperature
        held = []
        for step in range(1, HELD_OUT + 1):
            items = [self.items[i] for i in batch_indices(len(self.items), cfg.prompts_per_step, step, cfg.seed)]
            _, gens = self._rollout(items, cfg.seed * 1_000_003 + step, self.algorithm.config.count_padding)
            rewards, passed, _ = score(self.verifiers, items, gens, k)
            held.append((self.recorded, centred(rewards, k), passed))
        self.recorded = trained
        before = [trajectory_logp(self.policy, r, temperature) for r, _, _ in held]
        out = super()._update(batch)
        after = [trajectory_logp(self.policy, r, temperature) for r, _, _ in held]
        self.probe["held_out"] = {"held_advantages": torch.cat([a for _, a, _ in held]),
                               "held_passed": torch.cat([p for _, _, p in held]),
                               "held_before": torch.cat(before), "held_after": torch.cat(after)}
        return out


@dataclass
class StepEffect:
    """One training step of ``algorithm`` from the start, measured on its own batch and on held-out ones."""

    seed: int
    step: Uphill

    def _split(self, values: torch.Tensor, advantages: torch.Tensor) -> tuple[float, float]:
        up, down = advantages > 0, advantages < 0
        return (float(values[up].mean()) if up.any() else float("nan"),
                float(values[down].mean()) if down.any() else float("nan"))

    @property
    def before(self) -> tuple[float, float]:
        """mean ℓ before the step over the trained rows above / below their group's mean reward."""
        return self._split(self.step.before, self.step.rollout_advantages)

    @property
    def after(self) -> tuple[float, float]:
        return self._split(self.step.after, self.step.rollout_advantages)

    @property
    def held_gap(self) -> float:
        """mean Δℓ over held-out rows above their group's mean reward minus that over rows below it."""
        held = self.step.held_out
        up, down = self._split(held["held_after"] - held["held_before"], held["held_advantages"])
        return up - down

    @property
    def held_shift(self) -> float:
        """mean Δℓ over every held-out row (how far the step moves the policy on puzzles it did not see)."""
        held = self.step.held_out
        return float((held["held_after"] - held["held_before"]).mean())


#: the comparisons' steps: (model, lr, prompts per step); configs/experiments/compare_sudoku_{masked,block}.yaml
SETTINGS = {"tiny-llada": (LR, PROMPTS), "tiny-sdar": (1e-4, 8)}


def study_config(algorithm: str, start: Path, seed: int, model: str = "tiny-llada", prompts: int | None = None,
                 lr: float | None = None) -> TrainConfig:
    """The comparison's first step of ``algorithm`` on seed ``seed``, from the weights at ``start``
    (``prompts``, ``lr``: another step's size)."""
    base_lr, base_prompts = SETTINGS[model]
    return settings(algorithm, model, lr or base_lr, seed, prompts or base_prompts, GROUP, TEMPERATURE,
                    model_path=str(start), decoding={}, first_inner_only=False)


def step_effect(algorithm: str, start: Path, seed: int, model: str = "tiny-llada", prompts: int | None = None,
                lr: float | None = None) -> StepEffect:
    config = study_config(algorithm, start, seed, model, prompts, lr)
    return StepEffect(seed, measure(algorithm, model, config=config, trainer_cls=_HeldOutProbe))


def group_signal(run_dir: Path) -> list[dict[str, float]]:
    """Per training step of a finished run: reward, rollout accuracy and the zero-variance group shares."""
    keys = ("reward", "accuracy", "zero_variance_groups", "zero_variance_groups_solved")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [{k: float(row[k]) for k in keys if k in row} for row in rows]
