"""Real tiny models: logits-free log-probs, block attention masks, and DiPO's exact trajectory replay
against the torch engine's block decoder."""

from __future__ import annotations

import pytest
import torch

from dare.backends.engines.torch import TorchEngine
from dare.backends.models.loader import load_model
from dare.harness.engine import EngineContext
from dare.harness.records import DecodingConfig, Message
from dare.trainers import build_estimator
from dare.trainers.training.policy import ModelPolicy, linear_logp
from dare.trainers.training.rollout import rollout_batch
from dare.trainers.training.sequences import block_causal_mask, build_layout, key_mask, noisy_clean_mask


@pytest.mark.parametrize("arch", ["llada", "dream"])
def test_logits_free_logp_equals_full_logits(tiny, arch):
    loaded = load_model(tiny[arch])
    policy = ModelPolicy(loaded, chunk=5)
    ids = torch.randint(0, 250, (2, 12))
    valid = torch.ones(2, 12, dtype=torch.bool)
    valid[0, :3] = False
    pos = (valid.long().cumsum(1) - 1).clamp(min=0)
    mask = key_mask(valid)
    logits = loaded.net(ids, pos, mask)
    if loaded.arch.shift_logits:  # Dream: position i is predicted by output i - 1
        logits = torch.cat([logits[:, :1], logits[:, :-1]], 1)
    index = torch.arange(4, 12).expand(2, -1)
    targets = ids[:, 4:]
    expected = logits.log_softmax(-1)[:, 4:].gather(-1, targets[..., None])[..., 0]
    got, _ = policy.token_logp(ids, pos, mask, index, targets)
    assert torch.allclose(got, expected, atol=1e-5)


def test_chunked_cross_entropy_gradient_matches_dense():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(7, 5, dtype=torch.float64, generator=g).requires_grad_()
    w = torch.randn(11, 5, dtype=torch.float64, generator=g).requires_grad_()
    y = torch.randint(0, 11, (7,), generator=g)
    logp, _ = linear_logp(h, w, y, chunk=3)
    logp.sum().backward()
    g_h, g_w = h.grad.clone(), w.grad.clone()
    h.grad = w.grad = None
    (h @ w.T).log_softmax(-1).gather(-1, y[:, None]).sum().backward()
    assert torch.allclose(g_h, h.grad, atol=1e-5) and torch.allclose(g_w, w.grad, atol=1e-5)  # float32 logits


def test_noisy_half_sees_own_block_and_only_earlier_clean_blocks():
    positions = torch.arange(8)[None]
    mask = noisy_clean_mask(positions, torch.ones(1, 8, dtype=torch.bool), 4)[0, 0]
    noisy_to_noisy, noisy_to_clean = mask[:8, :8], mask[:8, 8:]
    clean_to_noisy, clean_to_clean = mask[8:, :8], mask[8:, 8:]
    blk = positions[0] // 4
    assert torch.equal(noisy_to_noisy, blk[:, None] == blk[None, :])
    assert torch.equal(noisy_to_clean, blk[None, :] < blk[:, None])
    assert not clean_to_noisy.any()
    assert torch.equal(clean_to_clean, blk[None, :] <= blk[:, None])
    assert torch.equal(clean_to_clean, block_causal_mask(positions, torch.ones(1, 8, dtype=torch.bool), 4)[0, 0])


@pytest.fixture(scope="module")
def sdar_rollout(tiny):
    ctx = EngineContext(model_name="tiny-sdar", model_path=tiny["sdar"], device="cpu",
                        options={"record_trajectory": True})
    engine = TorchEngine(ctx)
    decoding = DecodingConfig(gen_length=12, steps=6, block_length=4, remasking="low_confidence_static",
                              temperature=0.0, num_samples=1, batch_size=3)
    items = [_Item(_Sample(f"s{i}"), (Message(role="user", content=text),))
             for i, text in enumerate(["Solve 12+7", "A longer prompt about sudoku grids", "x"])]
    batch, gens = rollout_batch(engine, items, decoding, seed=0, count_padding=False, trajectory=True)
    return engine, batch


class _Sample:
    def __init__(self, sid):
        self.id = sid


class _Item:
    """A rollout item with fixed messages (rollout_batch reads .sample.id and .messages)."""

    def __init__(self, sample, messages):
        self.sample, self.messages = sample, messages


def _per_step_reference(policy, batch):
    """One block-causal forward per decoding step (the unpacked definition); returns logp (B, T) and the
    argmax at every committed position in its step's state."""
    layout = build_layout(batch)
    logp = torch.zeros(batch.completion_ids.shape)
    argmax = torch.full(batch.completion_ids.shape, -1)
    mask = block_causal_mask(layout.positions, layout.valid, policy.block_size)
    for s in sorted(set(batch.commit_step[batch.commit_step >= 0].tolist())):
        x = layout.tokens.clone()
        hide = (batch.commit_step >= s) | (batch.commit_step < 0)
        x[:, layout.response] = x[:, layout.response].masked_fill(hide, policy.mask_id)
        logits = policy.net(x, layout.positions, mask)[:, layout.response].float()
        now = batch.commit_step == s
        lp = logits.log_softmax(-1).gather(-1, batch.completion_ids[..., None])[..., 0]
        logp = torch.where(now, lp, logp)
        argmax = torch.where(now, logits.argmax(-1), argmax)
    return logp, argmax


def test_dipo_replay_reproduces_the_greedy_decoder_and_packing_is_exact(sdar_rollout):
    engine, batch = sdar_rollout
    policy = ModelPolicy(engine.model, block_size=4)
    est = build_estimator("block_trajectory", {})
    with torch.no_grad():
        packed = est.estimate(policy, batch, {}).token_logp
        reference, argmax = _per_step_reference(policy, batch)
    committed = batch.commit_step >= 0
    assert committed.sum() >= 12
    # the replayed state of each step makes the decoder's (greedy) choice again
    assert torch.equal(argmax[committed], batch.completion_ids[committed])
    assert torch.allclose(packed[committed], reference[committed], atol=1e-5)
    assert (packed[~committed] == 0).all()


def test_block_size_one_with_one_token_per_step_is_autoregressive(tiny):
    """With K = 1 and one token per step, the replay is the AR chain rule under the causal mask."""
    loaded = load_model(tiny["sdar"])
    policy = ModelPolicy(loaded, block_size=1)
    from .toy import make_batch

    batch = make_batch(1, 3, [5, 6, 7, 8], prompt_token=9)
    batch.commit_step = torch.arange(4)[None]
    with torch.no_grad():
        got = build_estimator("block_trajectory", {}).estimate(policy, batch, {}).token_logp
        layout = build_layout(batch)
        ar_mask = block_causal_mask(layout.positions, layout.valid, 1)
        for i in range(4):  # position 3 + i, with itself and later response tokens masked
            x = layout.tokens.clone()
            x[:, 3 + i:] = loaded.mask_id
            lp = loaded.net(x, layout.positions, ar_mask)[0, 3 + i].log_softmax(-1)[5 + i]
            assert torch.allclose(got[0, i], lp, atol=1e-5)


@pytest.mark.parametrize("arch, name", [("llada", "mc_elbo"), ("dream", "coupled"), ("sdar", "block_elbo")])
def test_packed_batches_give_the_padded_log_probs(tiny, arch, name):
    from .toy import make_batch

    loaded = load_model(tiny[arch])
    batch = make_batch(4, 9, list(range(40, 52)))
    batch.prompt_ids = torch.randint(0, 250, batch.prompt_ids.shape)
    batch.prompt_mask[0, :6] = False  # variable prompt lengths (left padding)
    batch.prompt_mask[2, :3] = False
    if arch == "sdar":  # variable response lengths (right padding not attended)
        batch.completion_attn[1, 7:] = False
        batch.completion_mask = batch.completion_attn.clone()
    est = build_estimator(name, {})
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        padded = est.estimate(ModelPolicy(loaded, block_size=4), batch, noise).token_logp
        packed = est.estimate(ModelPolicy(loaded, block_size=4, packed=True), batch, noise).token_logp
    real = batch.completion_attn
    assert torch.allclose(padded[real], packed[real], atol=1e-5)


def test_packing_puts_short_sequences_side_by_side(tiny):
    from dare.trainers.training.packing import pack

    from .toy import make_batch

    loaded = load_model(tiny["llada"])
    batch = make_batch(4, 20, list(range(40, 52)))
    batch.prompt_ids = torch.randint(0, 250, batch.prompt_ids.shape)
    batch.prompt_mask[1:, :18] = False  # three rows of 14 real tokens, one of 32
    layout = build_layout(batch)
    packing = pack(layout.tokens, layout.positions, key_mask(layout.valid), torch.zeros_like(layout.valid))
    assert packing.ids.shape == (3, 32)  # [32], [14, 14], [14]
    est = build_estimator("mc_elbo", {"samples": 2})
    noise = est.draw(batch, torch.Generator().manual_seed(1))
    with torch.no_grad():
        padded = est.estimate(ModelPolicy(loaded), batch, noise).token_logp
        packed = est.estimate(ModelPolicy(loaded, packed=True), batch, noise).token_logp
    assert torch.allclose(padded, packed, atol=1e-5)


@pytest.mark.parametrize("arch, steps", [("llada", 12), ("llada", 3), ("dream", 6)])
def test_masked_diffusion_replay_reproduces_the_greedy_decoder(tiny, arch, steps):
    remasking = "low_confidence" if arch == "llada" else "maskgit_plus"
    engine = TorchEngine(EngineContext(model_name="tiny", model_path=tiny[arch], device="cpu",
                                       options={"record_trajectory": True}))
    decoding = DecodingConfig(gen_length=12, steps=steps, block_length=4, remasking=remasking, temperature=0.0,
                              num_samples=1, batch_size=2)
    items = [_Item(_Sample(f"s{i}"), (Message(role="user", content=t),)) for i, t in enumerate(["hi", "a longer one"])]
    batch, _ = rollout_batch(engine, items, decoding, seed=0, count_padding=True, trajectory=True)
    policy = ModelPolicy(engine.model)
    with torch.no_grad():
        got = build_estimator("mdm_trajectory", {"steps_per_forward": 3}).estimate(policy, batch, {}).token_logp
        layout = build_layout(batch)
        mask = key_mask(layout.valid)
        for s in sorted(set(batch.commit_step.flatten().tolist())):
            x = layout.tokens.clone()
            x[:, layout.response] = x[:, layout.response].masked_fill(batch.commit_step >= s, policy.mask_id)
            logits = engine.model.net(x, layout.positions, mask)
            if engine.model.arch.shift_logits:
                logits = torch.cat([logits[:, :1], logits[:, :-1]], 1)
            logits = logits[:, layout.response]
            now = batch.commit_step == s
            assert torch.equal(logits.argmax(-1)[now], batch.completion_ids[now])  # the decoder's greedy choice
            expected = logits.log_softmax(-1).gather(-1, batch.completion_ids[..., None])[..., 0]
            assert torch.allclose(got[now], expected[now], atol=1e-5)
