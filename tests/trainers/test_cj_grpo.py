"""CJ-GRPO: the ascending step schedule, EOS early rejection in real decoders, exact replay of the step map
under that decoding, equal weight per transition, micro-batch invariance, DARE's variant, end to end."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from dare.backends.decoding.common import (
    ascending_schedule,
    early_eos_rejection,
    max_ascending_steps,
    step_quotas,
)
from dare.backends.engines.torch import TorchEngine
from dare.harness.engine import EngineContext
from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig, Message
from dare.trainers import build_estimator
from dare.trainers.algorithms.cj_grpo import step_pooled_weights, transition_weights
from dare.trainers.api import build_algorithm
from dare.trainers.cli import main
from dare.trainers.training.config import resolve_algorithm
from dare.trainers.training.evaluate import read_eval_marker
from dare.trainers.training.policy import ModelPolicy
from dare.trainers.training.rollout import rollout_batch
from dare.trainers.training.sequences import build_layout, key_mask
from dare.trainers.training.trainer import accumulate_gradients

from .toy import ContextFreePolicy, make_batch

LLADA = SimpleNamespace(attention="bidirectional", decoding_family="mdm")
DREAM = SimpleNamespace(attention="bidirectional", decoding_family="dream")
SDAR = SimpleNamespace(attention="block_causal", decoding_family="block")


@pytest.mark.parametrize("length", [1, 2, 4, 6, 8, 32, 100, 128, 256, 1000])
def test_ascending_schedule_doubles_never_decreases_and_fills_the_block(length):
    steps = max_ascending_steps(length)
    quotas = ascending_schedule(torch.tensor([length]), steps)[0]
    assert int(quotas.sum()) == length
    assert all(quotas[i] <= quotas[i + 1] for i in range(steps - 1))
    assert quotas[:-1].tolist() == [2 ** k for k in range(steps - 1)]
    log2 = length.bit_length() - 1
    assert steps in (log2, log2 + 1)  # the paper's log2(L) steps, one more where the last step is large enough
    assert steps == log2 or length & (length - 1) or length < 4
    too_many = DecodingConfig(gen_length=length, block_length=length, steps=steps + 1)
    with pytest.raises(ConfigError, match="at most"):
        step_quotas(too_many, "ascending", torch.tensor([length]), steps + 1)


def test_eos_gamma_rises_linearly_and_touches_only_stop_proposals():
    model = SimpleNamespace(stop_ids=(7, 9))
    x0 = torch.tensor([[7, 3, 9, 1]])
    conf = torch.full((1, 4), 0.8, dtype=torch.float64)
    cfg = DecodingConfig(gen_length=8, block_length=8, steps=5)
    for step, gamma in [(0, 0.01), (2, 0.505), (4, 1.0)]:
        out = early_eos_rejection(conf, x0, step, 5, cfg, (0.01, 1.0), "uniform", model)
        assert torch.allclose(out, torch.tensor([[0.8 * gamma, 0.8, 0.8 * gamma, 0.8]], dtype=torch.float64))
    ascending = cfg.model_copy(update={"steps": 3})
    # progress = share of the block committed after the step: 1/8, 3/8, 8/8 for quotas 1, 2, 5
    got = [float(early_eos_rejection(conf, x0, s, 3, ascending, (0.01, 1.0), "ascending", model)[0, 0]) / 0.8
           for s in range(3)]
    assert got == pytest.approx([0.01 + 0.99 * f for f in (1 / 8, 3 / 8, 1.0)])
    plain = DecodingConfig(gen_length=8, block_length=8)
    assert torch.equal(early_eos_rejection(conf, x0, 0, 5, plain, None, "uniform", model), conf)


class _Item:
    def __init__(self, sid, text):
        self.sample, self.messages = SimpleNamespace(id=sid), (Message(role="user", content=text),)


def _rollout(path, decoding, texts=("hi", "a longer prompt")):
    engine = TorchEngine(EngineContext(model_name="tiny", model_path=path, device="cpu",
                                       options={"record_trajectory": True}))
    items = [_Item(f"s{i}", t) for i, t in enumerate(texts)]
    batch, gens = rollout_batch(engine, items, decoding, seed=0, count_padding=True, trajectory=True)
    return engine, batch, gens


def _paper_decoding(arch_name, arch, base):
    algo = build_algorithm("cj_grpo")
    return base.model_copy(update=algo.rollout_decoding(base, arch))


def test_eoser_commits_fewer_and_later_stop_tokens_in_a_real_rollout(tiny):
    """A tiny LLaDA biased towards EOS (greedy, one full-canvas block): rejecting early EOS proposals leaves
    fewer EOS tokens, fewer of them among the first commits, and commits them later."""
    base = DecodingConfig(gen_length=16, steps=16, block_length=16, temperature=0.0, num_samples=1, batch_size=2)
    engine = TorchEngine(EngineContext(model_name="tiny", model_path=tiny["llada"], device="cpu",
                                       options={"record_trajectory": True}))
    net, eos_id = engine.model.net, engine.model.eos_id
    weight = net.lm_head.weight.detach().clone()
    items = [_Item("a", "hi"), _Item("b", "a longer prompt")]
    for bias in (1.0, 2.0):
        biased = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=True)
        with torch.no_grad():
            biased.weight.copy_(weight)
            biased.bias.zero_()
            biased.bias[eos_id] = bias  # EOS is the most likely proposal at many positions
        net.lm_head = biased
        seen = {}
        for name, extra in [("plain", {}), ("eoser", {"eos_gamma": [0.01, 1.0]})]:
            batch, _ = rollout_batch(engine, items, base.model_copy(update={"extra": extra}), 0, True, True)
            eos = batch.completion_ids == eos_id
            seen[name] = (float(eos.float().mean()), int(eos[batch.commit_step == 0].sum()),
                          float(batch.commit_step[eos].float().mean()))
        assert seen["eoser"][0] < seen["plain"][0], seen  # fewer EOS tokens
        if bias == 2.0:
            assert seen["eoser"][1] < seen["plain"][1], seen  # fewer EOS among the first commits
        else:
            assert seen["eoser"][2] > seen["plain"][2], seen  # EOS committed later


@pytest.mark.parametrize("arch", ["llada", "sdar"])
def test_replay_reproduces_the_paper_decoding_exactly(tiny, arch):
    """Rolled out with EOSER + ascending steps (full canvas for LLaDA), the replayed state of every step makes
    the decoder's greedy choice again, and the step sizes follow the schedule."""
    base = DecodingConfig(gen_length=16, steps=16, block_length=8 if arch == "llada" else 4, temperature=0.0,
                          num_samples=1, batch_size=2,
                          remasking="low_confidence" if arch == "llada" else "low_confidence_static")
    decoding = _paper_decoding(arch, LLADA if arch == "llada" else SDAR, base)
    engine, batch, _ = _rollout(tiny[arch], decoding)
    block = decoding.block_length
    assert decoding.extra["step_schedule"] == "ascending" and decoding.extra["eos_gamma"] == [0.01, 1.0]
    assert block == (16 if arch == "llada" else 4)
    assert decoding.steps == max_ascending_steps(block) * (16 // block)
    policy = ModelPolicy(engine.model, block if arch == "sdar" else None)
    name = "mdm_trajectory" if arch == "llada" else "block_trajectory"
    with torch.no_grad():
        got = build_estimator(name, {}).estimate(policy, batch, {}).token_logp
    layout = build_layout(batch)
    expected_sizes = ascending_schedule(torch.tensor([block]), max_ascending_steps(block))[0].tolist()
    for row in range(batch.size):
        steps = batch.commit_step[row]
        sizes = [int((steps == s).sum()) for s in sorted(set(steps[steps >= 0].tolist()))]
        if arch == "llada":
            assert (steps >= 0).all()  # every response token belongs to exactly one transition
            assert sizes == expected_sizes  # 1, 2, 4, 9 tokens: monotonic, sums to gen_length
            for s in range(len(sizes)):
                x = layout.tokens[row:row + 1].clone()
                x[:, layout.response] = x[:, layout.response].masked_fill(steps[None] >= s, policy.mask_id)
                keys = key_mask(layout.valid[row:row + 1])
                logits = engine.model.net(x, layout.positions[row:row + 1], keys)[0, layout.response]
                now = steps == s
                assert torch.equal(logits.argmax(-1)[now], batch.completion_ids[row][now])
                lp = logits.log_softmax(-1).gather(-1, batch.completion_ids[row][:, None])[:, 0]
                assert torch.allclose(got[row][now], lp[now], atol=1e-5)
    assert torch.isfinite(got).all() and (got <= 0).all()


def test_every_transition_weighs_the_same_whatever_its_size():
    commit = torch.tensor([[0] * 30 + [1] + [2, 2], [0, 0, 1, 1] + [-1] * 29])
    mask = commit >= 0
    w = transition_weights(commit, mask)
    assert torch.allclose(w.sum(-1), torch.ones(2, dtype=w.dtype))
    assert w[0, :30].sum() == pytest.approx(1 / 3) and w[0, 30] == pytest.approx(1 / 3)  # 30 tokens vs 1
    assert w[1, :2].sum() == pytest.approx(0.5) and (w[1, 4:] == 0).all()
    pooled = step_pooled_weights(commit, mask)  # per step over the batch: 32 + 2 tokens at step 0, then 3 + 2
    assert pooled.sum() == pytest.approx(1.0)
    assert pooled[0, 0] == pytest.approx(1 / 32 / 3) and pooled[0, 30] == pytest.approx(1 / 3 / 3)


def _toy_batch(policy, rewards, commit):
    batch = make_batch(len(rewards), 1, [0, 1, 2])
    batch.commit_step = torch.tensor(commit)
    batch.rewards = torch.tensor(rewards)
    batch.group_ids = torch.zeros(len(rewards), dtype=torch.long)
    batch.noise = [{}]
    with torch.no_grad():
        old = build_estimator("mdm_trajectory", {}).estimate(policy, batch, {}).token_logp
    batch.old_logp = (old - 0.3 * torch.arange(3.0))[None]  # an older policy: ratios != 1
    return batch


def _grads(algo, policy, batch, micro):
    policy.zero_grad()
    total, _ = accumulate_gradients(algo, policy, batch, micro, 0)
    return policy.logits.grad / total


@pytest.mark.parametrize("reduction", ["transition", "step_pooled"])
def test_gradient_accumulation_matches_the_reduction(reduction):
    policy = ContextFreePolicy(n=3, vocab=4)
    batch = _toy_batch(policy, [1.0, 0.0, 0.5, 0.2], [[0, 1, 1], [0, 0, 0], [2, 0, 1], [0, 1, 2]])
    algo = build_algorithm("cj_grpo", {"reduction": reduction, "beta": 0.0})
    algo.bind("bidirectional")
    batch.advantages = algo.advantages(batch)
    whole = _grads(algo, policy, batch, 4)
    if reduction == "transition":  # per-row terms: micro-batching changes nothing
        assert torch.allclose(whole, _grads(algo, policy, batch, 1), atol=1e-12)
    else:  # pooled per step over the micro-batch, as the reference code does on each device
        assert not torch.allclose(whole, _grads(algo, policy, batch, 1), atol=1e-6)


def test_paper_and_dare_versions_differ_in_decoding_and_loss():
    base = DecodingConfig(gen_length=256, steps=128, block_length=32)
    paper = build_algorithm("cj_grpo")
    name, settings = resolve_algorithm("cj_grpo_dare", {})
    dare = build_algorithm(name, settings)
    assert paper.rollout_decoding(base, LLADA) == {
        "block_length": 256, "steps": 8, "extra": {"eos_gamma": [0.01, 1.0], "step_schedule": "ascending"}}
    assert dare.rollout_decoding(base, LLADA) == {}  # DARE: the suite's uniform semi-AR decoding
    assert paper.rollout_decoding(base, SDAR)["steps"] == 8 * 5  # blocks keep their length: 5 steps per block of 32
    assert paper.requirements().reference and not dare.requirements().reference
    policy = ContextFreePolicy(n=3, vocab=4)
    batch = _toy_batch(policy, [1.0, 0.0, 0.5], [[0, 1, 1], [0, 0, 0], [2, 0, 1]])
    losses = []
    for algo in (paper, dare):
        algo.bind("bidirectional")
        batch.advantages = algo.advantages(batch)
        batch.ref_logp = batch.old_logp
        losses.append(float(algo.loss(policy, batch, 0).loss.detach()))
    assert abs(losses[0] - losses[1]) > 1e-3, losses
    with pytest.raises(ConfigError, match="not 'dream'"):
        paper.rollout_decoding(base, DREAM)
    assert dare.rollout_decoding(base, DREAM) == {}


def test_cj_grpo_trains_tiny_llada_and_evaluates(tmp_path):
    args = ["--algo", "cj_grpo", "--model", "tiny-llada", "--suite", "sudoku", "--out", str(tmp_path), "--steps", "2",
            "--set", "prompts_per_step=1", "--set", "group_size=2", "--set", "decoding.gen_length=8",
            "--set", "decoding.steps=8", "--set", "decoding.block_length=8", "--set", "algo.inner_steps=2",
            "--set", "rollout.temperature=1.0", "--eval-limit", "2"]
    assert main(args) == 0
    run_dir = tmp_path / "cj_grpo-sudoku-tiny-llada-s0"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and rows[0]["first_inner_ratio_max_dev"] == 0.0
    assert rows[0]["nfe"] == 3.0 and rows[0]["transitions"] == 3.0  # ascending: 1 + 2 + 5 tokens in 3 steps
    assert "kl_ref" in rows[1] and "ref_logp" in rows[0]["time"]
    record = json.loads((read_eval_marker(run_dir) / "run.json").read_text())
    assert record["status"] == "complete" and record["model"]["training"]["algorithm"] == "cj_grpo"
    assert record["decoding"]["steps"] == 8  # evaluation keeps the suite's decoding


@pytest.mark.slow
@pytest.mark.parametrize("algo, model", [("cj_grpo", "tiny-sdar"), ("cj_grpo_dare", "tiny-llada"),
                                         ("cj_grpo_dare", "tiny-dream"), ("cj_grpo_dare", "tiny-sdar")])
def test_cj_grpo_variants_train_two_steps(tmp_path, algo, model):
    assert main(["--algo", algo, "--model", model, "--suite", "sudoku", "--out", str(tmp_path), "--steps", "2",
                 "--set", "prompts_per_step=1", "--set", "group_size=2", "--set", "decoding.gen_length=8",
                 "--set", "decoding.steps=8", "--set", "decoding.block_length=4", "--no-eval"]) == 0
    rows = [json.loads(line) for line in (tmp_path / f"{algo}-sudoku-{model}-s0" / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [1, 2] and rows[0]["first_inner_ratio_max_dev"] == 0.0


def test_paper_decoding_on_dream_is_one_line_config_error(tmp_path, capsys):
    assert main(["--algo", "cj_grpo", "--model", "tiny-dream", "--suite", "sudoku", "--out", str(tmp_path),
                 "--steps", "1", "--no-eval"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cj_grpo_dare" in err, err
