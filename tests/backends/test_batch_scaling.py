"""Greedy confidences by chunked float64 reductions (dare.backends.decoding.stats): the same numbers as the
textbook float64 softmax, the same tokens as a policy built on it, and rows independent of their batch.
Speed itself is measured by benchmarks/decode_batch.py, never asserted here."""

from __future__ import annotations

import pytest
import torch

from dare.backends.decoding import dream, stats
from dare.backends.decoding.common import Canvas, top_count
from dare.backends.decoding.mdm import decode_masked_diffusion
from dare.backends.models.loader import load_model
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

VOCAB = 5000  # large enough that the chunks below split the vocabulary rows unevenly
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [20, 21, 22], [30, 31, 32, 33, 34]]


@pytest.fixture(scope="module")
def wide_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("wide")
    overrides = {"llada": {"vocab_size": VOCAB, "embedding_size": VOCAB}, "dream": {"vocab_size": VOCAB}}
    return {arch: load_model(write_tiny_checkpoint(arch, root / arch, seed=3, std=0.3, config_overrides=o))
            for arch, o in overrides.items()}


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch):
    monkeypatch.setattr(stats, "CHUNK_ELEMENTS", 3 * VOCAB + 7)  # 3 positions per chunk, a ragged last chunk


def _textbook(logits):
    probs = logits.double().softmax(-1)
    return probs, probs.argmax(-1)


def test_reductions_equal_the_textbook_softmax():
    logits = torch.randn(2, 7, VOCAB, generator=torch.Generator().manual_seed(0)) * 4
    got = stats.greedy_stats(logits, entropy=True, margin=True)
    probs, x0 = _textbook(logits)
    top2 = probs.topk(2, dim=-1).values
    assert torch.equal(got["x0"], x0)
    torch.testing.assert_close(got["p"], probs.gather(-1, x0[..., None])[..., 0], rtol=1e-13, atol=0)
    torch.testing.assert_close(got["neg_entropy"], (probs * probs.log()).sum(-1), rtol=1e-13, atol=0)
    torch.testing.assert_close(got["margin"], top2[..., 0] - top2[..., 1], rtol=1e-12, atol=0)
    other = torch.randint(0, VOCAB, (2, 7))
    torch.testing.assert_close(stats.prob_of(logits, other), probs.gather(-1, other[..., None])[..., 0],
                               rtol=1e-13, atol=0)


def test_banned_tokens_add_nothing():
    logits = torch.randn(1, 4, VOCAB, generator=torch.Generator().manual_seed(1))
    banned = logits.clone()
    banned[..., :10] = float("-inf")
    got = stats.greedy_stats(banned, entropy=True, margin=True)
    probs = banned.double().softmax(-1)
    assert torch.isfinite(got["neg_entropy"]).all()
    torch.testing.assert_close(got["neg_entropy"], torch.special.xlogy(probs, probs).sum(-1), rtol=1e-13, atol=0)


def _textbook_policy(kind, sign=1):
    """The policies as they were written before the reductions: full (B, K, V) float64 probabilities
    (``sign=-1``: the least confident first, to show the comparison is sensitive to the order)."""
    def policy(logits, masked, quota, step, steps, gens, cfg, opts, model):
        probs, x0 = _textbook(logits)
        if kind == "low_confidence":
            return top_count(sign * probs.gather(-1, x0[..., None])[..., 0], masked, quota), x0
        if kind == "entropy":
            conf = (probs * probs.clamp(min=1e-30).log()).sum(-1)
        else:
            top2 = probs.topk(2, dim=-1).values
            conf = top2[..., 0] - top2[..., 1]
        last = step >= steps - 1
        count = masked.sum(-1) if last else (masked.sum(-1) * dream._ratio(step, steps, opts.eps)).long()
        return top_count(sign * conf, masked, count), x0
    return policy


def _decode(model, decode, cfg, prompts):
    canvas = Canvas.build(prompts, cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    gens = [torch.Generator().manual_seed(i) for i in range(len(prompts))]
    with torch.inference_mode():
        return decode(model, canvas, cfg, gens)


@pytest.mark.parametrize("arch,kind,steps", [("llada", "low_confidence", 16), ("dream", "entropy", 8),
                                             ("dream", "topk_margin", 8)])
def test_tokens_equal_the_full_softmax_policy(wide_models, arch, kind, steps):
    model = wide_models[arch]
    cfg = DecodingConfig(gen_length=16, steps=steps, block_length=8, remasking=kind)
    family = "mdm" if arch == "llada" else "dream"
    ours = _decode(model, decoders.get(f"{family}:{kind}"), cfg, PROMPTS)
    opts = decoders.get(f"{family}:{kind}").Options()
    reference, reversed_ = (_decode(model, lambda m, c, d, g, s=s: decode_masked_diffusion(
        m, c, d, opts, g, _textbook_policy(kind, s)), cfg, PROMPTS) for s in (1, -1))
    assert torch.equal(ours.tokens, reference.tokens)
    assert torch.equal(ours.commit_step, reference.commit_step)
    assert not torch.equal(ours.commit_step, reversed_.commit_step)  # the order of confidences is what is checked


@pytest.mark.parametrize("arch,kind", [("llada", "low_confidence"), ("dream", "entropy")])
def test_a_row_decodes_alike_alone_and_in_a_batch(wide_models, arch, kind):
    model = wide_models[arch]
    cfg = DecodingConfig(gen_length=16, steps=8, block_length=8, remasking=kind)
    decode = decoders.get(f"{'mdm' if arch == 'llada' else 'dream'}:{kind}")
    batch = _decode(model, decode, cfg, PROMPTS)
    for row, prompt in enumerate(PROMPTS):
        alone = _decode(model, lambda m, c, d, g, row=row: decode(m, c, d, [torch.Generator().manual_seed(row)]), cfg,
                        [prompt])
        assert torch.equal(alone.tokens[0], batch.tokens[row])
        assert torch.equal(alone.commit_step[0], batch.commit_step[row])


@pytest.mark.parametrize("cfg_scale", [0.0, 1.5])
def test_row_groups_change_no_output(wide_models, monkeypatch, cfg_scale):
    from dare.backends.decoding import mdm

    model = wide_models["llada"]
    cfg = DecodingConfig(gen_length=16, steps=8, block_length=8, cfg_scale=cfg_scale)
    decode = decoders.get("mdm:low_confidence")
    monkeypatch.setattr(mdm, "CPU_TOKENS_PER_FORWARD", 10**6)
    whole = _decode(model, decode, cfg, PROMPTS)
    calls = []
    net = model.net
    monkeypatch.setattr(model, "net", lambda *a, **k: calls.append(a[0].shape[0]) or net(*a, **k))
    monkeypatch.setattr(mdm, "CPU_TOKENS_PER_FORWARD", 1)  # one row per call
    grouped = _decode(model, decode, cfg, PROMPTS)
    assert set(calls) == {1}
    assert torch.equal(whole.tokens, grouped.tokens) and torch.equal(whole.commit_step, grouped.commit_step)
