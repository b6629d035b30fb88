"""Decoder properties on tiny random models: commit order, block boundaries, schedules, trajectory replay."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from dare.backends.decoding.common import Canvas, quota_schedule
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

PROMPTS = [[5, 6, 7, 8, 9, 10, 11, 12], [20, 21, 22, 23, 24]]  # lengths 8 and 5: padding + block offsets


class Recorder(torch.nn.Module):
    """Wraps a network and keeps (input_ids, logits) of every call."""

    def __init__(self, net):
        super().__init__()
        self.net, self.args, self.calls = net, net.args, []

    def forward(self, ids, positions, mask=None, cache=None, logits_range=None):
        logits = self.net(ids, positions, mask, cache)
        self.calls.append((ids.clone(), logits.clone()))
        return logits if logits_range is None else logits[:, logits_range[0]:logits_range[1]]


def run(model, name, prompts=PROMPTS, seeds=None, **fields):
    cfg = DecodingConfig(**fields)
    canvas = Canvas.build(prompts, cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    gens = [torch.Generator().manual_seed(s) for s in (seeds or range(len(prompts)))]
    with torch.no_grad():
        return decoders.get(name)(model, canvas, cfg, gens), canvas


def test_low_confidence_commits_the_most_confident_position(tiny_models):
    model = tiny_models["llada"]
    spy = dataclasses.replace(model, net=Recorder(model.net))
    result, canvas = run(spy, "mdm:low_confidence", gen_length=8, block_length=4, steps=8)
    assert len(spy.net.calls) == 8
    for step, (ids, logits) in enumerate(spy.net.calls):
        lo = canvas.gen_start + (step // 4) * 4
        conf = logits[:, lo:lo + 4].softmax(-1).max(-1).values
        conf = conf.masked_fill(ids[:, lo:lo + 4] != model.mask_id, -1.0)
        expected = conf.argmax(-1) + (step // 4) * 4
        for row in range(2):
            assert result.commit_step[row, expected[row]] == step
            assert (result.commit_step[row] == step).sum() == 1


@pytest.mark.parametrize("arch,name,block", [
    ("llada", "mdm:low_confidence", 4), ("dream", "dream:entropy", 4), ("sdar", "block:low_confidence_static", 4),
    ("sdar_moe", "block:low_confidence_dynamic", 4), ("llada2_moe", "block:low_confidence", 8)])
def test_blocks_are_decoded_in_order(tiny_models, arch, name, block):
    result, canvas = run(tiny_models[arch], name, gen_length=16, block_length=block, steps=16, threshold=0.5)
    for row in range(2):
        steps, blocks = result.commit_step[row], result.block[row]
        assert (steps >= 0).all() or (result.tokens[row] == tiny_models[arch].eos_id).any()
        for b in range(int(blocks.max())):
            done = steps[(blocks == b) & (steps >= 0)]
            later = steps[(blocks > b) & (steps >= 0)]
            if len(done) and len(later):
                assert done.max() < later.min()
        if arch.startswith(("sdar", "llada2")):  # blocks are aligned on absolute positions
            positions = len(PROMPTS[row]) + torch.arange(16)
            assert torch.equal(blocks, positions // block - positions[0] // block)


@pytest.mark.parametrize("arch,name", [("llada", "mdm:low_confidence"), ("llada", "mdm:random"),
                                       ("sdar", "block:low_confidence_static"), ("sdar", "block:sequential")])
def test_commits_per_step_follow_the_schedule(tiny_models, arch, name):
    result, _ = run(tiny_models[arch], name, prompts=[PROMPTS[0]], gen_length=16, block_length=8, steps=6)
    counts = torch.bincount(result.commit_step[0], minlength=6).tolist()
    per_block = quota_schedule(torch.tensor([8]), 3)[0].tolist()
    assert per_block == [3, 3, 2] and counts == per_block * 2


def _replay_argmax(model, canvas, result, block: int | None):
    """Rebuild the canvas step by step from the trajectory; a greedy decoder must have committed, at each
    step, the argmax of a full (uncached) forward over the partially decoded canvas."""
    x = canvas.tokens.clone()
    gen = canvas.gen_slice
    x[:, gen] = model.mask_id
    mask = canvas.valid[:, None, None, :].expand(-1, 1, x.shape[1], -1).clone()
    if block:
        blk = canvas.positions // block
        mask &= blk[:, None, None, :] <= blk[:, None, :, None]
    mask |= torch.eye(x.shape[1], dtype=torch.bool)
    for step in range(int(result.commit_step.max()) + 1):
        with torch.no_grad():
            logits = model.net(x, canvas.positions, mask)
        if model.arch.shift_logits:
            logits = torch.cat([logits[:, :1], logits[:, :-1]], 1)
        now = result.commit_step == step
        proposal = logits[:, gen].argmax(-1)
        assert torch.equal(proposal[now], result.tokens[now]), f"step {step}"
        x[:, gen] = torch.where(now, result.tokens, x[:, gen])
    assert torch.equal(x[:, gen], result.tokens)


@pytest.mark.parametrize("arch,name,block", [
    ("llada", "mdm:low_confidence", 8), ("dream", "dream:maskgit_plus", 16),
    ("sdar", "block:low_confidence_dynamic", 4),
    ("sdar_moe", "block:low_confidence_static", 4), ("llada2_moe", "block:low_confidence", 8)])
def test_trajectory_replays_to_the_final_sequence(tiny_models, arch, name, block):
    model = tiny_models[arch]
    model = dataclasses.replace(model, stop_ids=(-1,))  # no early stop: every position gets decoded
    result, canvas = run(model, name, prompts=[PROMPTS[0]], gen_length=16, block_length=block, steps=16,
                         threshold=0.3 if "dynamic" in name else None)
    assert (result.commit_step >= 0).all()
    _replay_argmax(model, canvas, result, block if model.arch.attention == "block_causal" else None)


def test_dream_origin_and_margin_fill_the_canvas(tiny_models):
    for name in ("dream:origin", "dream:topk_margin"):
        result, _ = run(tiny_models["dream"], name, gen_length=8, block_length=8, steps=4, temperature=0.5)
        assert (result.tokens != tiny_models["dream"].mask_id).all() and (result.commit_step >= 0).all()


def test_llada_cfg_and_threshold(tiny_models):
    model = tiny_models["llada"]
    plain, _ = run(model, "mdm:low_confidence", gen_length=8, block_length=8, steps=8)
    guided, _ = run(model, "mdm:low_confidence", gen_length=8, block_length=8, steps=8, cfg_scale=2.0)
    assert (guided.nfe == 2 * plain.nfe).all() and not torch.equal(plain.tokens, guided.tokens)
    fast, _ = run(model, "mdm:low_confidence", gen_length=8, block_length=8, steps=1, threshold=0.01)
    assert (fast.nfe < plain.nfe).all() and (fast.tokens != model.mask_id).all()


def test_llada21_editing_rewrites_and_stops(tiny_models):
    model = dataclasses.replace(tiny_models["llada2_moe"], stop_ids=(-1,))
    result, _ = run(model, "block:editing", gen_length=16, block_length=8, steps=16, threshold=0.5,
                    extra={"editing_threshold": 0.05, "max_post_steps": 3})
    assert (result.tokens != model.mask_id).all()
    per_block_masks = 8  # each row needs <= 8 unmasking steps + 3 post steps (+1 store, +1 prefill) per block
    assert (result.nfe <= 3 * (per_block_masks + 3 + 1) + 1).all()


def test_sampling_diversifies_and_seed_reproduces(tiny_models):
    model = tiny_models["sdar"]
    prompts = [PROMPTS[0]] * 4
    first, _ = run(model, "block:low_confidence_static", prompts=prompts, seeds=[1, 2, 3, 4], gen_length=8,
                   block_length=4, steps=8, temperature=1.0)
    again, _ = run(model, "block:low_confidence_static", prompts=prompts[:2], seeds=[1, 2], gen_length=8,
                   block_length=4, steps=8, temperature=1.0)
    assert torch.equal(first.tokens[:2], again.tokens)
    assert len({tuple(t.tolist()) for t in first.tokens}) > 1
