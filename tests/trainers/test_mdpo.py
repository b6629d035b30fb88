"""MDPO: step scores on a hand-made reward matrix, per-step group advantages and top-K, the decoder's
intermediate states and confidences rebuilt from the step map, λ_t and confidence weighting, DARE's
variant, end to end."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from dare.backends.engines.torch import TorchEngine
from dare.harness.engine import EngineContext
from dare.harness.records import DecodingConfig, Message
from dare.trainers.algorithms.mdpo import select_steps, step_advantages, step_scores
from dare.trainers.api import build_algorithm
from dare.trainers.cli import main
from dare.trainers.estimators.step_prediction import step_predictions, step_states
from dare.trainers.training.config import resolve_algorithm
from dare.trainers.training.evaluate import read_eval_marker
from dare.trainers.training.policy import ModelPolicy
from dare.trainers.training.rollout import rollout_batch
from dare.trainers.training.sequences import build_layout, key_mask

from .toy import ContextFreePolicy, make_batch


def test_step_scores_on_a_hand_made_reward_matrix():
    rewards = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    # s_t = (R_t - R_{t-1} + 1) + mean_{k>t} R_k, R_0 = 0, the last step adds R_T
    expected = torch.tensor([[1 + 1.0, 2 + 1.0, 1 + 1.0], [2 + 0.5, 0 + 1.0, 2 + 1.0]])
    assert torch.allclose(step_scores(rewards), expected)


def test_step_advantages_are_normalised_per_group_and_step_and_top_k_uses_abs_sum():
    scores = torch.tensor([[1.0, 5.0, 2.0], [3.0, 5.0, 2.0], [0.0, 1.0, 7.0], [0.0, 3.0, 7.0]])
    groups = torch.tensor([0, 0, 1, 1])
    adv = step_advantages(scores, groups)
    one = 1 / (2 ** 0.5 + 1e-6)  # a pair differing by 2: (±1) / unbiased std sqrt(2)
    assert torch.allclose(adv[:, 0], torch.tensor([-one, one, 0.0, 0.0]), atol=1e-6)
    assert torch.allclose(adv[:, 1], torch.tensor([0.0, 0.0, -one, one]), atol=1e-6)
    assert torch.equal(adv[:, 2], torch.zeros(4))  # equal scores: no signal at this step
    assert select_steps(adv, 2).tolist() == [0, 1]  # sorted, the all-zero step dropped
    assert select_steps(adv, 16).tolist() == [0, 1, 2]  # K larger than the number of steps: all of them


class _Item:
    def __init__(self, sid, text):
        self.sample, self.messages = SimpleNamespace(id=sid), (Message(role="user", content=text),)


@pytest.fixture(scope="module")
def greedy_rollout(tiny):
    engine = TorchEngine(EngineContext(model_name="tiny", model_path=tiny["llada"], device="cpu",
                                       options={"record_trajectory": True}))
    decoding = DecodingConfig(gen_length=12, steps=6, block_length=4, temperature=0.0, num_samples=1, batch_size=2)
    items = [_Item("a", "hi"), _Item("b", "a much longer prompt")]
    batch, _ = rollout_batch(engine, items, decoding, seed=0, count_padding=True, trajectory=True)
    return engine, batch


def test_states_and_confidences_rebuilt_from_the_step_map_are_the_decoders(greedy_rollout):
    """Greedy LLaDA with semi-AR blocks: at every step the rebuilt state x_t gives the committed tokens as its
    argmax, and the committed positions are exactly the most confident masked ones of the active block
    (the decoder's low-confidence rule), so x_t, x̂0_t and c_t are what the decoder saw and computed."""
    engine, batch = greedy_rollout
    policy = ModelPolicy(engine.model)
    preds, conf = step_predictions(policy, batch, chunk=5)
    n_steps = int(batch.commit_step.max()) + 1
    assert preds.shape == (2, n_steps, 12) and conf.shape == preds.shape
    layout = build_layout(batch)
    for row in range(batch.size):
        commit = batch.commit_step[row]
        for t in range(n_steps):
            hidden = step_states(batch.commit_step[row:row + 1], torch.tensor([[t]]))[0, 0]
            x = layout.tokens[row:row + 1].clone()
            x[:, layout.response] = x[:, layout.response].masked_fill(hidden, policy.mask_id)
            logits = engine.model.net(x, layout.positions[row:row + 1], key_mask(layout.valid[row:row + 1]))
            greedy = logits[0, layout.response].argmax(-1)
            now = commit == t
            assert torch.equal(greedy[now], batch.completion_ids[row][now])
            assert torch.equal(preds[row, t][hidden], greedy[hidden])  # x̂0_t: the argmax at masked positions
            assert torch.equal(preds[row, t][~hidden], batch.completion_ids[row][~hidden])  # visible kept
            block = (torch.arange(12) // 4) == (now.nonzero()[0, 0] // 4)
            others = hidden & block & ~now
            if others.any():
                assert conf[row, t][now].min() >= conf[row, t][others].max()
        assert torch.equal(preds[row, -1], batch.completion_ids[row])  # the last prediction is the response


def test_tempered_predictions_draw_from_and_score_with_softmax_over_t(greedy_rollout):
    """MDPO's diffusion_generate (autonomousvision/mdpo src/mdlm_generation_utils.py): logits / T, p =
    softmax, x̂0 ~ Categorical(p), confidence p(x̂0); committed and visible tokens keep the rollout's."""
    engine, batch = greedy_rollout
    policy = ModelPolicy(engine.model)
    preds, conf = step_predictions(policy, batch, chunk=5, temperature=0.5, seed=1)
    again, _ = step_predictions(policy, batch, chunk=5, temperature=0.5, seed=1)
    greedy, _ = step_predictions(policy, batch, chunk=5)
    assert torch.equal(preds, again)  # the draws are seeded
    layout = build_layout(batch)
    drawn = 0
    for row in range(batch.size):
        for t in (0, 1):
            hidden = step_states(batch.commit_step[row:row + 1], torch.tensor([[t]]))[0, 0]
            x = layout.tokens[row:row + 1].clone()
            x[:, layout.response] = x[:, layout.response].masked_fill(hidden, policy.mask_id)
            logits = engine.model.net(x, layout.positions[row:row + 1], key_mask(layout.valid[row:row + 1]))
            p = (logits[0, layout.response].float() / 0.5).softmax(-1)
            picked = p.gather(-1, preds[row, t][:, None])[:, 0]
            assert torch.allclose(conf[row, t][hidden], picked[hidden], rtol=1e-4)
            assert torch.equal(preds[row, t][~hidden], batch.completion_ids[row][~hidden])
            drawn += int((preds[row, t] != greedy[row, t]).sum())
    assert drawn > 0  # sampling, not the argmax


def _loss_batch(confidence, advantages, steps):
    """Three response slots, a context-free policy, chosen steps (B, K) on commit steps [0, 1, 2]."""
    policy = ContextFreePolicy(n=3, vocab=4)
    batch = make_batch(len(steps), 1, [0, 1, 2])
    batch.commit_step = torch.tensor([[0, 1, 2]] * len(steps))
    b, k = torch.tensor(steps).shape
    batch.noise = [{"steps": torch.tensor(steps), "targets": torch.tensor([[[0, 1, 2]] * k] * b),
                    "confidence": torch.tensor(confidence, dtype=torch.float32),
                    "advantages": torch.tensor(advantages, dtype=torch.float32)}]
    return policy, batch


def _mdpo_loss(policy, batch, **settings):
    algo = build_algorithm("mdpo", {"beta": 0.0, **settings})
    algo.bind("bidirectional")
    with torch.no_grad():
        batch.old_logp = algo.estimator.estimate(policy, batch, batch.noise[0]).token_logp[None]
    out = algo.loss(policy, batch, 0)
    return float(out.loss.detach()), out.weight


def test_loss_is_lambda_and_confidence_weighted_and_fully_decoded_steps_add_nothing():
    conf = [[[0.5, 0.2, 0.9], [1.0, 1.0, 0.3]]]
    policy, batch = _loss_batch(conf, [[2.0, -1.0]], [[0, 2]])
    # ratio 1: l_i = -A λ_t, λ_t = L / (m_t + 1e-4); each (row, step) is its own micro-batch divided by
    # m_t + 1e-4 (autonomousvision/mdpo mdpo_trainer.py compute_loss), then the mean over the pairs.
    # Step 0 masks all 3 slots, step 2 slot 2 only.
    lam0, lam2 = 3 / (3 + 1e-4), 3 / (1 + 1e-4)
    step0 = -2.0 * lam0 * (0.5 + 0.2 + 0.9) / (3 + 1e-4)
    step2 = 1.0 * lam2 * 0.3 / (1 + 1e-4)
    expected = (step0 + step2) / 2
    loss, weight = _mdpo_loss(policy, batch)
    assert loss == pytest.approx(expected, rel=1e-6) and weight == 2
    unweighted, _ = _mdpo_loss(policy, batch, confidence_weighting=False)
    assert unweighted == pytest.approx((-2.0 * lam0 * 3 / (3 + 1e-4) + lam2 / (1 + 1e-4)) / 2, rel=1e-6)
    pooled, pooled_weight = _mdpo_loss(policy, batch, reduction="pooled")
    assert pooled == pytest.approx((-2.0 * lam0 * 1.6 + lam2 * 0.3) / 4, rel=1e-6) and pooled_weight == 4
    # a state after the last step has nothing masked: it changes neither the sum nor the count
    policy, batch = _loss_batch([conf[0] + [[1.0, 1.0, 1.0]]], [[2.0, -1.0, 5.0]], [[0, 2, 3]])
    assert _mdpo_loss(policy, batch) == pytest.approx((expected, 2))


def test_paper_and_dare_versions_differ():
    paper = build_algorithm("mdpo")
    name, settings = resolve_algorithm("mdpo_dare", {})
    dare = build_algorithm(name, settings)
    assert not paper.requirements().reference and not dare.requirements().reference  # β = 0 in both
    assert paper.config.temperature == 0.1 and dare.config.temperature == 1.0
    policy, batch = _loss_batch([[[0.5, 0.2, 0.9], [1.0, 1.0, 0.3]]], [[1.0, -2.0]], [[0, 2]])
    losses = []
    for algo in (paper, dare):
        algo.bind("bidirectional")
        assert algo.estimator.temperature == algo.config.temperature
        with torch.no_grad():
            est = algo.estimator.estimate(policy, batch, batch.noise[0]).token_logp
        batch.old_logp = (est - 0.1)[None]  # ratio e^0.1 = 1.105: inside the clip for both signs
        losses.append(float(algo.loss(policy, batch, 0).loss.detach()))
    # per-step mean: (1.105 * (-1) * 1 * 1.6 / 3 + 1.105 * 2 * 3 * 0.3 / 1) / 2 (λ, / m and the 1e-4s aside)
    # pooled: (1.105 * (-1.6) + 1.105 * 2 * 3 * 0.3) / 4
    r = math.exp(0.1)
    per_step = (-r * 3 / 3.0001 * 1.6 / 3.0001 + 2 * r * 3 / 1.0001 * 0.3 / 1.0001) / 2
    assert losses[0] == pytest.approx(per_step, rel=1e-5)
    assert losses[1] == pytest.approx((-r * 3 / 3.0001 * 1.6 + 2 * r * 3 / 1.0001 * 0.3) / 4, rel=1e-5)


def test_mdpo_trains_tiny_llada_and_evaluates(tmp_path):
    args = ["--algo", "mdpo", "--model", "tiny-llada", "--suite", "sudoku", "--out", str(tmp_path), "--steps", "2",
            "--set", "prompts_per_step=1", "--set", "group_size=2", "--set", "decoding.gen_length=8",
            "--set", "decoding.steps=4", "--set", "decoding.block_length=8", "--set", "algo.train_steps=2",
            "--set", "rollout.temperature=1.0", "--eval-limit", "2"]
    assert main(args) == 0
    run_dir = tmp_path / "mdpo-sudoku-tiny-llada-s0"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and rows[0]["first_inner_ratio_max_dev"] == 0.0
    assert rows[0]["trained_steps"] == 2.0 and "prepare" in rows[0]["time"] and "ref_logp" not in rows[0]["time"]
    assert all(math.isfinite(r["loss"]) for r in rows) and rows[0]["skipped_nonfinite"] == 0
    record = json.loads((read_eval_marker(run_dir) / "run.json").read_text())
    assert record["status"] == "complete" and record["model"]["training"]["algorithm"] == "mdpo"


def test_mdpo_on_a_block_model_is_a_one_line_config_error(tmp_path, capsys):
    assert main(["--algo", "mdpo", "--model", "tiny-sdar", "--suite", "sudoku", "--out", str(tmp_path),
                 "--steps", "1", "--no-eval"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs a bidirectional model" in err, err


@pytest.mark.slow
@pytest.mark.parametrize("algo, model", [("mdpo_dare", "tiny-llada"), ("mdpo", "tiny-dream")])
def test_mdpo_variants_train_two_steps(tmp_path, algo, model):
    assert main(["--algo", algo, "--model", model, "--suite", "sudoku", "--out", str(tmp_path), "--steps", "2",
                 "--set", "prompts_per_step=1", "--set", "group_size=2", "--set", "decoding.gen_length=8",
                 "--set", "decoding.steps=8", "--set", "decoding.block_length=4", "--no-eval"]) == 0
    rows = [json.loads(line) for line in (tmp_path / f"{algo}-sudoku-{model}-s0" / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [1, 2] and rows[0]["first_inner_ratio_max_dev"] == 0.0
