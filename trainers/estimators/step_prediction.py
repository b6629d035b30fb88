"""MDPO's intermediate states: the canvas x_t before decoding step t, the model's clean prediction x̂0_t
from it with per-token confidences, and the per-step likelihood log p(x̂0_t | prompt, x_t).

x_t is rebuilt from the rollout's step map instead of being stored: a completion token is visible in x_t
iff it was committed before step t. This is exact for decoders that never rewrite a committed token
(every masked-diffusion decoder here). x̂0_t keeps the visible tokens, takes the committed token where
step t committed one (what the sampler wrote) and the argmax elsewhere; the confidence c_t is the plain
softmax probability of x̂0_t (LLaDA's low-confidence score). Under greedy decoding this is exactly what the
decoder computed at step t (tested). Shapes: B rows, T completion tokens, S decoding steps, K chosen steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..api import Estimator, estimator
from ..batch import Estimate, RolloutBatch
from ..training.sequences import build_layout
from .masked import attention_mask


def step_states(commit_step: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """Which completion tokens are still masked before each step: commit_step (B, T), steps (B, K) ->
    (B, K, T) bool (committed at or after the step, or never)."""
    commit = commit_step[:, None, :]
    return (commit >= steps[..., None]) | (commit < 0)


def _chunks(count: int, chunk: int):
    """Slices covering range(count) in pieces of ``chunk`` (rows of (row, step) states per forward)."""
    for start in range(0, count, chunk):
        yield slice(start, start + chunk)


@torch.no_grad()
def step_predictions(policy, batch: RolloutBatch, chunk: int = 8, temperature: float | None = None,
                     seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x̂0_t and c_t for every step t of every row: predictions (B, S, T) long, confidence (B, S, T) float,
    S = the batch's largest step count (rows with fewer steps see their final tokens after their last).

    ``temperature`` None: argmax and the plain softmax probability. A temperature T > 0: MDPO's
    ``diffusion_generate`` (autonomousvision/mdpo src/mdlm_generation_utils.py): p = softmax(logits / T), x̂0
    drawn from Categorical(p) (generator seeded with ``seed``), c = p(x̂0)."""
    layout = build_layout(batch)
    commit = batch.commit_step
    b, t = commit.shape
    n_steps = int(commit.max()) + 1 if commit.numel() else 0
    rows = torch.arange(b, device=commit.device).repeat_interleave(n_steps)
    steps = torch.arange(n_steps, device=commit.device).repeat(b)
    preds = batch.completion_ids[:, None, :].repeat(1, n_steps, 1)
    conf = torch.ones(b, n_steps, t, device=commit.device)
    full_mask = attention_mask(policy, layout)
    weight = policy.net.lm_head.weight
    generator = torch.Generator(device=weight.device).manual_seed(seed)
    for part in _chunks(rows.shape[0], chunk):
        r, s = rows[part], steps[part]
        hidden = step_states(commit[r], s[:, None])[:, 0]  # (N, T)
        inputs = layout.tokens[r].clone()
        inputs[:, layout.response] = inputs[:, layout.response].masked_fill(hidden, policy.mask_id)
        index = layout.response_index()[r]
        source = (index - 1).clamp(min=0) if policy.shift_logits else index
        h = policy.hidden(inputs, layout.positions[r], full_mask[r])
        picked = h.gather(1, source[..., None].expand(-1, -1, h.shape[-1]))
        final = batch.completion_ids[r]
        for n in range(picked.shape[0]):  # one (T, V) logits matrix at a time: the vocabulary is large
            logits = (picked[n] @ weight.T).float()
            if temperature is None:
                drawn = logits.argmax(-1)
            else:
                logits = logits / temperature
                drawn = torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]
            guess = torch.where(commit[r[n]] == s[n], final[n], drawn)
            guess = torch.where(hidden[n], guess, final[n])
            preds[r[n], s[n]] = guess
            conf[r[n], s[n]] = (logits.gather(-1, guess[:, None])[:, 0] - logits.logsumexp(-1)).exp()
    return preds, conf


@dataclass(frozen=True)
class StepTargets:
    """The decoding steps MDPO trains on and what it trains them towards (``batch.extras["mdpo"]``, written by
    MDPO's ``prepare``; the estimator's draws are these tensors, shared by the old, new and reference passes).

    steps (B, K) long: the chosen steps, the same K for every row.
    targets (B, K, T) long: the clean prediction x̂0_t of each chosen step.
    confidence (B, K, T) float: the prediction's probability of each target token.
    advantages (B, K) float: the step advantages of the chosen steps.
    step_reward_first / step_reward_last: the mean reward of x̂0 at the first / last step (logged).
    """

    steps: torch.Tensor
    targets: torch.Tensor
    confidence: torch.Tensor
    advantages: torch.Tensor
    step_reward_first: float = 0.0
    step_reward_last: float = 0.0

    def noise(self) -> dict[str, torch.Tensor]:
        """The estimator's draws: the four tensors by name."""
        return {"steps": self.steps, "targets": self.targets, "confidence": self.confidence,
                "advantages": self.advantages}

    def metrics(self) -> dict[str, float]:
        """What a training step logs about the chosen steps."""
        return {"step_reward_first": self.step_reward_first, "step_reward_last": self.step_reward_last,
                "trained_steps": float(self.steps.shape[1])}


@estimator("step_prediction")
class StepPrediction(Estimator):
    """MDPO: token_logp (B, K, T) = log p_θ(x̂0_{t,i} | prompt, x_t), logits / ``temperature``, at the K steps
    the algorithm chose (``batch.extras["mdpo"]``, a :class:`StepTargets`: steps (B, K), targets (B, K, T)); one
    forward per (row, chosen step), ``steps_per_forward`` at a time. The draws are those chosen steps, shared by
    old, new and ref passes."""

    forwards = 0  # one per chosen step
    capabilities = frozenset({"trajectory"})

    def __init__(self, steps_per_forward: int = 8, temperature: float = 1.0):
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.steps_per_forward = int(steps_per_forward)
        self.temperature = float(temperature)

    def draw(self, batch: RolloutBatch, generator: torch.Generator) -> dict[str, torch.Tensor]:
        chosen = batch.extras.get("mdpo")
        if not isinstance(chosen, StepTargets):
            raise ValueError("step_prediction needs the steps chosen by MDPO's prepare (batch.extras['mdpo'])")
        return chosen.noise()

    def estimate(self, policy, batch: RolloutBatch, noise: dict[str, torch.Tensor]) -> Estimate:
        if batch.commit_step is None:
            raise ValueError("step_prediction needs the rollout's step map (batch.commit_step)")
        layout = build_layout(batch)
        device = layout.tokens.device
        steps, targets = noise["steps"].to(device), noise["targets"].to(device)
        b, k = steps.shape
        hidden = step_states(batch.commit_step, steps)  # (B, K, T)
        inputs = layout.tokens[:, None, :].repeat(1, k, 1)
        inputs[..., layout.response] = inputs[..., layout.response].masked_fill(hidden, policy.mask_id)
        flat = inputs.view(b * k, -1)
        rows = torch.arange(b, device=device).repeat_interleave(k)
        full_mask = attention_mask(policy, layout)
        index = layout.response_index()
        logp, entropy = [], []
        scaled = {"temperature": self.temperature} if self.temperature != 1.0 else {}  # logits / T
        for part in _chunks(rows.shape[0], self.steps_per_forward):
            r = rows[part]
            lp, ent = policy.token_logp(flat[part], layout.positions[r], full_mask[r], index[r],
                                        targets.view(b * k, -1)[part], **scaled)
            logp.append(lp)
            entropy.append(ent)
        shape = (b, k, -1)
        return Estimate(torch.cat(logp).view(shape), torch.cat(entropy).view(shape))
