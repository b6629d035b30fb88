"""d-TreeRPO: tree rollouts over the denoising chain, sibling-relative advantages on each parent -> child edge.

Rollout (:mod:`..training.tree_rollout`): per prompt, the fully masked canvas branches into ``trees``
children, every later node into ``branch`` children, at the branch points of contraction ``contraction``;
each edge continues its parent with the evaluation's decoder. Leaves are scored by the suite's verifier.
Value of a node: its reward at a leaf, else the mean of its children's values. Local advantage of a
non-root node: V_i - mean(V_siblings ≠ i) (V_i for a lone child; the ``tree_sibling`` estimator on the
segments' child values). Each edge is one training row, scored by ``tree_transition`` (one forward on the
parent canvas) with ``segment_ppo`` (PPO-clip ε 0.4 per edge, token mean per edge, edges averaged, k3 KL β
0.01 to the reference, and the self-distillation term, on by default as in DARE's recipe). An edge counts the
tokens it decoded up to the child's first EOS (``count_padding`` has no effect).

Defaults: yjyddq/DARE@83ae8a3 (PR #16, merged as b4e9b1d): verl/trainer/ppo/dtreerpo_algos.py
``compute_dtreerpo_rewards_and_segments``, verl/workers/rollout/dtreerpo_llada_rollout.py,
verl/workers/actor/llada_dp_actor_dtreerpo.py and recipe/llada/run_dtreerpo_llada_8b_instruct.sh: branch 4,
contraction 2, 4 trees (20 edges and 16 leaves per prompt), rollout temperature 0.9, clip 0.4, β 0.01,
12 PPO epochs, λ_max 3e-3, γ 2, τ_max 2, β_τ 0.7 with the actor's default max_steps 30000 (so λ_t is about
3e-8 x step early in a run). The recipe's 128 steps, blocks of 32, 256 tokens, lr 3e-5, grad clip 0.2 and
LoRA r128 / α64 are TrainConfig and decoding settings. Differences: DARE splits each epoch's edges into
mini-batches of 16 (an optimizer step each); here each inner step is one update over all edges. The
reference THU-BPM/d-TreeRPO@3eb6f21 (dtreerpo/dtreerpo_trainer.py) consumes one buffered edge per step
instead. Masked diffusion only (LLaDA, Dream), as in DARE.
"""

from __future__ import annotations

import torch
from pydantic import Field

from dare.harness.errors import ConfigError

from ..advantages import AdvantageName, advantage
from ..api import Algorithm, Estimator, Needs, RolloutAdditions, algorithm
from ..batch import RolloutBatch
from ..losses.ppo import PolicyGradientConfig
from ..training.tree_rollout import branch_steps, tree_rollout


@advantage("tree_sibling")
def tree_sibling_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """r_j - mean_{k ≠ j} r_k over each group (d-TreeRPO's local advantage of a child among its siblings);
    r_j for a group of one (DARE: no sibling, baseline 0). ``eps`` is unused."""
    out = torch.empty_like(rewards, dtype=torch.float64)
    r = rewards.double()
    for g in torch.unique(group_ids):
        rows = group_ids == g
        n, total = int(rows.sum()), r[rows].sum()
        out[rows] = r[rows] - (total - r[rows]) / (n - 1) if n > 1 else r[rows]
    return out.to(rewards.dtype)


class TreeRollout(RolloutAdditions):
    """What the tree rollout sets in the DecodingConfig: its leaves per prompt and its sampling temperature."""

    num_samples: int = Field(description="leaves per prompt: trees x branch ** (levels - 1)")
    temperature: float = Field(description="rollout sampling temperature (DARE's recipe: 0.9)")


class DTreeRPOConfig(PolicyGradientConfig):
    advantage: AdvantageName = "tree_sibling"
    clip_low: float = Field(0.4, ge=0, description="PPO clip ε below 1 (DARE: clip_ratio 0.4, symmetric)")
    clip_high: float = Field(0.4, ge=0, description="PPO clip ε above 1")
    beta: float = Field(0.01, ge=0, description="k3 KL coefficient against the reference (DARE: LoRA disabled)")
    inner_steps: int = 12
    trees: int = Field(4, ge=1, description="children of the root (num_tree_samples)")
    branch: int = Field(4, ge=1, description="children of every later internal node (tree_branch_factor)")
    contraction: int = Field(2, ge=1, description="branch points T - floor(k T / s), k = 1..s "
                             "(tree_contraction_factor)")
    temperature: float = Field(0.9, ge=0, description="rollout sampling temperature")
    skip_zero_logp: bool = Field(True, description="drop tokens whose new log-prob is exactly 0 from the counted "
                                 "tokens (DARE's active mask reads the log-probs: new_local_logps != 0)")
    self_distillation: bool = Field(True, description="add the sibling self-distillation term (DARE's recipe: on)")
    sd_lambda_max: float = Field(3e-3, ge=0)
    sd_gamma: float = Field(2.0, gt=0)
    sd_tau_max: float = Field(2.0, gt=0)
    sd_tau_power: float = Field(0.7, ge=0, description="β of τ_t = τ_max (1 - progress)^β")
    sd_max_steps: int = Field(30000, ge=1, description="progress = step / sd_max_steps (DARE's actor default)")


@algorithm("d_treerpo", aliases=("dtreerpo", "d-treerpo"))
class DTreeRPO(Algorithm):
    """Clipped policy gradient on tree edges with sibling-relative advantages (its own rollout)."""

    needs = Needs(rollout=True, attention="bidirectional")
    Config = DTreeRPOConfig
    RolloutAdditions = TreeRollout
    policy_loss = "segment_ppo"
    default_estimator = "tree_transition"

    def bind(self, attention: str) -> Estimator:
        if self.estimator_name(attention) != "tree_transition":
            raise ConfigError("d_treerpo scores tree edges with the tree_transition estimator; drop algo.estimator")
        return super().bind(attention)

    def leaves_per_prompt(self, steps: int) -> int:
        cfg = self.config
        return cfg.trees * cfg.branch ** (len(branch_steps(steps, cfg.contraction)) - 2)

    def rollout_additions(self, decoding, arch) -> TreeRollout:
        return TreeRollout(num_samples=self.leaves_per_prompt(decoding.steps), temperature=self.config.temperature)

    def check_rollout(self, decoding) -> None:
        if decoding.threshold is not None or decoding.factor is not None:
            raise ConfigError("d_treerpo branches at steps of the fixed-step schedule; unset threshold and factor "
                              "in rollout_decoding")
        if decoding.num_samples != self.leaves_per_prompt(decoding.steps):
            raise ConfigError(f"rollout_decoding num_samples={decoding.num_samples}, but d_treerpo's trees have "
                              f"{self.leaves_per_prompt(decoding.steps)} leaves per prompt; drop num_samples")

    def rollout_plan(self, decoding) -> dict:
        cfg = self.config
        bounds = branch_steps(decoding.steps, cfg.contraction)
        leaves = self.leaves_per_prompt(decoding.steps)
        edges = sum(cfg.trees * cfg.branch ** d for d in range(len(bounds) - 1))
        return {"mode": "tree", "trees": cfg.trees, "branch": cfg.branch, "contraction": cfg.contraction,
                "branch_steps": bounds, "leaves_per_prompt": leaves, "segments_per_prompt": edges,
                "forwards_per_prompt": sum(cfg.trees * cfg.branch ** d * (b - a)
                                           for d, (a, b) in enumerate(zip(bounds, bounds[1:])))}

    def rollout(self, engine, items, decoding, seed: int, step: int, count_padding: bool, trajectory: bool):
        cfg = self.config
        return tree_rollout(engine, items, decoding, seed, cfg.trees, cfg.branch, cfg.contraction, step + 1,
                            trajectory)

    def row_rewards(self, batch: RolloutBatch, rewards: torch.Tensor) -> torch.Tensor:
        """The leaves' rewards (P x leaves,) item-major -> each edge's child value (E,)."""
        tree = batch.extras["tree"]
        values = tree.node_values(rewards.view(-1, len(tree.leaves)).cpu())
        tree.values = values
        return values[tree.prompt, tree.child].to(rewards.dtype)
