"""d-TreeRPO against yjyddq/DARE's own code (tests/trainers/fixtures/dtreerpo_official.json, written by
fixtures/scripts/make_dtreerpo_fixture.py from DARE@83ae8a3): node values and local advantages of hand-built
trees, and the segment loss with its KL and self-distillation terms, value and gradient, on a toy network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms)
from dare.trainers.algorithms.d_treerpo import tree_sibling_advantages
from dare.trainers.api import build_algorithm
from dare.trainers.batch import RolloutBatch
from dare.trainers.training.data import stop_mask
from dare.trainers.training.tree_rollout import TreeSegments, branch_steps, tree_parents

from .tree_toy import EOS, MASK, ToyDenoiser, ToyPolicy

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "dtreerpo_official.json").read_text())


def _advantages(case) -> tuple[torch.Tensor, torch.Tensor]:
    """Ours for a fixture tree: local advantages and group ids, (batch, nodes - 1) each."""
    parents = tree_parents(case["trees"], case["branch"], len(case["branch_points"]) - 1)
    leaves = [n for n in range(len(parents)) if n not in parents]
    tree = TreeSegments(parents, leaves, torch.zeros(0), torch.zeros(0), torch.zeros(0), [])
    values = tree.node_values(torch.tensor(case["leaf_rewards"]))
    b, n = values.shape
    child = torch.arange(1, n).repeat(b)
    prompt = torch.arange(b).repeat_interleave(n - 1)
    groups = prompt * n + torch.tensor(parents)[child]
    adv = tree_sibling_advantages(values[prompt, child], groups)
    return adv.view(b, n - 1), groups.view(b, n - 1), values


@pytest.mark.parametrize("case", FIXTURE["segments"], ids=lambda c: f"T{c['trees']}-b{c['branch']}-s{c['contraction']}")
def test_values_and_local_advantages_are_dares(case):
    """Branch points, breadth-first node order, bottom-up means and leave-one-out sibling advantages (a lone
    child keeps its value) as compute_dtreerpo_rewards_and_segments gives them; one segment per non-root node."""
    steps = case["steps"]
    assert branch_steps(steps, case["contraction"]) == [steps - p for p in case["branch_points"]]
    assert tree_parents(case["trees"], case["branch"], len(case["branch_points"]) - 1) == case["parents"]
    adv, groups, values = _advantages(case)
    assert torch.allclose(adv, torch.tensor(case["local_advantages"], dtype=adv.dtype), atol=1e-6)
    ours = {tuple((groups == g).flatten().tolist()) for g in groups.unique()}
    theirs = torch.tensor(case["group_ids"])
    assert ours == {tuple((theirs == g).flatten().tolist()) for g in theirs.unique()}  # one group per (prompt, parent)
    assert adv.numel() == case["num_segments"] == (len(case["parents"]) - 1) * case["batch"]
    assert values[:, 0].mean().item() == pytest.approx(case["mean_root_value"], abs=1e-6)


def test_sibling_advantages_sum_to_zero_and_lone_children_keep_their_value():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.25, 0.75, 2.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 2])
    adv = tree_sibling_advantages(rewards, groups)
    assert adv[:3].sum().abs() < 1e-6 and adv[3:5].sum().abs() < 1e-6 and adv[5] == 2.0
    assert torch.allclose(adv[:3], torch.tensor([0.75, -0.75, 0.0]))


def _segment_batch(case, old, ref, step: int) -> RolloutBatch:
    plen = len(case["prompt"])
    parent = torch.tensor(case["parent_ids"])[:, plen:]
    child = torch.tensor(case["child_ids"])[:, plen:]
    rows = len(child)
    counted = (parent == MASK) & (child != MASK) & stop_mask(child, (EOS,))
    batch = RolloutBatch(prompt_ids=torch.tensor([case["prompt"]] * rows), prompt_mask=torch.ones(rows, plen).bool(),
                         completion_ids=child, completion_mask=counted, completion_attn=torch.ones_like(counted),
                         group_ids=torch.tensor(case["group_ids"]), advantages=torch.tensor(case["advantages"]),
                         old_logp=torch.tensor(old)[None], ref_logp=torch.tensor(ref)[None],
                         noise=[{"parent": parent}])
    batch.extras["tree"] = TreeSegments([], [], torch.zeros(0), torch.zeros(0), parent, [], step)
    return batch


def _loss(settings: dict, advantages_sign: float = 1.0):
    spec = FIXTURE["loss"]
    case = spec["case"]
    net = ToyDenoiser(certain=tuple(case["certain"]))
    algo = build_algorithm("d_treerpo", {"sd_max_steps": spec["max_steps"], **settings})
    algo.bind("bidirectional")
    batch = _segment_batch(case, spec["old_local_logps"], spec["ref_local_logps"], spec["global_step"])
    batch.advantages = batch.advantages * advantages_sign
    out = algo.loss(ToyPolicy(net), batch, 0)
    out.loss.backward()
    return out, {n: p.grad for n, p in net.named_parameters()}


@pytest.mark.parametrize("self_distillation", [True, False], ids=["with_sd", "without_sd"])
def test_segment_loss_and_gradient_are_dares(self_distillation):
    """PPO-clip 0.4 per edge (token mean, edges averaged) + 0.01 k3 + λ_t self-distillation, at ratios off 1 on
    both sides of the clip and with a token of log-prob exactly 0 (DARE drops it from the active mask)."""
    run = next(r for r in FIXTURE["loss"]["runs"] if r["self_distillation"] == self_distillation)
    out, grads = _loss({"self_distillation": self_distillation})
    total = run["pg_loss"] + run["kl_loss"] + run["sd_loss"]
    assert out.loss.item() == pytest.approx(total, rel=1e-5, abs=1e-7)
    assert out.metrics["policy_loss"] == pytest.approx(run["pg_loss"], rel=1e-5)
    if self_distillation:
        assert out.metrics["sd_lambda"] * out.metrics["sd_kl"] == pytest.approx(run["sd_loss"], rel=1e-5)
    for name, expected in run["grads"].items():
        assert torch.allclose(grads[name], torch.tensor(expected), rtol=1e-4, atol=1e-7), name


def test_the_fixture_tells_the_terms_apart():
    """Self-distillation, the sign of the advantages and DARE's exact-zero rule each change the loss or gradient
    beyond the parity tolerance, so the parity test would catch any of them switched off."""
    runs = {r["self_distillation"]: r for r in FIXTURE["loss"]["runs"]}
    sd_grad = max((torch.tensor(runs[True]["grads"][n]) - torch.tensor(runs[False]["grads"][n])).abs().max().item()
                  for n in runs[True]["grads"])
    assert sd_grad > 1e-5 and runs[True]["sd_loss"] > 1e-4
    flipped, _ = _loss({}, advantages_sign=-1.0)
    assert abs(flipped.metrics["policy_loss"] - runs[True]["pg_loss"]) > 1e-2
    counted, _ = _loss({"skip_zero_logp": False})
    assert abs(counted.loss.item() - (runs[True]["pg_loss"] + runs[True]["kl_loss"] + runs[True]["sd_loss"])) > 1e-4
