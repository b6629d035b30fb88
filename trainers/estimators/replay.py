"""``replay_steps``: RLDF's denoising states replayed from a rollout's own trajectory (ant-research/Drift@7abd99b
``trainer/masking_strategy.py`` ``_build_sequential_masking``, ``_sample_k_indices``; ``trainer/main_rl.py``
``compute_per_token_logps``).

Draw, per row: the candidate steps are those that committed at least one counted token; step s weighs
w_s = -mean log p(token at its commit) over its tokens (surprisal; the log-probabilities the rollout sampled with,
``batch.extras["commit_logp"]`` (B, T), probabilities floored at 1e-10). ``steps`` of them are drawn from
softmax(w / ``selection_temperature``) without replacement; a row with fewer candidates takes all of them and
fills the rest with replacement. Temperature 0: the top ones (the argmax repeated); >= 1e4 (or equal weights):
uniform, and no log-probabilities are needed. The draws consume the generator in the official order (one
``multinomial`` or ``randperm`` per row), so a seed selects the steps Drift's seed selects. A row without
candidates gets dummy steps (-1) that score nothing.

Estimate: for chosen step s the input hides every completion position committed at or after s (or never): the
state just before s, rebuilt from the recorded tokens. token_logp (B, K, T) = log p(y_i | that state) at every
hidden counted position (not only those committed at s), 0 elsewhere. One full-canvas forward per (row, step).
"""

from __future__ import annotations

import math

import torch

from ..api import estimator
from ..batch import Estimate, RolloutBatch
from .step_prediction import StepPrediction, step_states

UNIFORM_TEMPERATURE = 1e4
"""At or above this selection temperature the draw is uniform (Drift's ``UNIFORM_TEMP_THRESHOLD``)."""


def pick(weights: torch.Tensor, k: int, temperature: float, generator: torch.Generator) -> list[int]:
    """Indices of ``k`` of the candidates (surprisal weights (C,) float32), drawn as Drift draws them."""
    count = int(weights.numel())
    if count > 1 and bool(weights.std() < 1e-8):  # equal weights (Drift: one candidate's std is NaN, not < 1e-8)
        return _uniform(count, k, generator)
    if temperature == 0:
        if count >= k:
            return weights.topk(k).indices.tolist()
        return list(range(count)) + [int(weights.argmax())] * (k - count)
    probs = torch.softmax(weights / temperature, 0)
    if count >= k:
        return torch.multinomial(probs, k, replacement=False, generator=generator).tolist()
    return list(range(count)) + torch.multinomial(probs, k - count, replacement=True, generator=generator).tolist()


def _uniform(count: int, k: int, generator: torch.Generator) -> list[int]:
    """``k`` of ``count`` candidates uniformly: a permutation's first k, or all of them repeated and the rest drawn."""
    if count >= k:
        return torch.randperm(count, generator=generator)[:k].tolist()
    chosen = list(range(count)) * (k // count)
    if k % count:
        chosen += torch.randperm(count, generator=generator)[:k % count].tolist()
    return chosen


@estimator("replay_steps")
class ReplaySteps(StepPrediction):
    """RLDF: ``steps`` decoding steps per row drawn by surprisal, each scored on the replayed state before it:
    token_logp (B, K, T) at every position still masked there."""

    def __init__(self, steps: int = 4, selection_temperature: float = 1.0, steps_per_forward: int = 8):
        if steps < 1 or selection_temperature < 0:
            raise ValueError("need steps >= 1 and selection_temperature >= 0")
        super().__init__(steps_per_forward=steps_per_forward)
        self.steps, self.selection_temperature = int(steps), float(selection_temperature)

    @property
    def uniform(self) -> bool:
        return math.isinf(self.selection_temperature) or self.selection_temperature >= UNIFORM_TEMPERATURE

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """steps (B, K) long: the chosen steps in drawing order, -1 for a row without candidates."""
        if batch.commit_step is None:
            raise ValueError("replay_steps needs the rollout's step map (batch.commit_step)")
        logp = batch.extras.get("commit_logp")
        if logp is None and not self.uniform:
            raise ValueError("replay_steps needs each token's log-probability at its commit "
                             "(batch.extras['commit_logp']) unless selection_temperature >= 1e4")
        commit, counted = batch.commit_step.cpu(), batch.completion_mask.cpu()
        out = torch.full((batch.size, self.steps), -1, dtype=torch.long)
        for row in range(batch.size):
            candidates = [int(s) for s in torch.unique(commit[row][counted[row] & (commit[row] >= 0)])]
            if not candidates:
                continue
            weights = None
            if not self.uniform:
                probs = [logp[row].cpu()[(commit[row] == s) & counted[row]].double().exp().float().clamp(min=1e-10)
                         for s in candidates]
                weights = torch.tensor([float(-p.log().mean()) for p in probs], dtype=torch.float32)
            chosen = (_uniform(len(candidates), self.steps, generator) if weights is None
                      else pick(weights, self.steps, self.selection_temperature, generator))
            out[row] = torch.tensor([candidates[i] for i in chosen])
        return {"steps": out}

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        steps = noise["steps"].to(batch.completion_ids.device)
        b, k = steps.shape
        targets = batch.completion_ids[:, None, :].repeat(1, k, 1)
        est = super().estimate(policy, batch, {"steps": steps.clamp(min=0), "targets": targets})
        hidden = replay_masks(batch.commit_step, steps) & batch.completion_mask[:, None]
        return Estimate(est.token_logp * hidden, est.entropy)


def replay_masks(commit_step: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """Positions (B, K, T) still masked before each chosen step; nothing for a dummy step (-1)."""
    return step_states(commit_step, steps) & (steps >= 0)[..., None]
