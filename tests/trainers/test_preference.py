"""DPO / VRPO: the stratified ELBO, the shared-noise variance reduction, the loss, the pair data, end to end."""

from __future__ import annotations

import json
import math

import pytest
import torch

from dare.harness import config as hcfg
from dare.harness.data import DATA_DIR, load_samples
from dare.harness.errors import ConfigError, DataError
from dare.harness.prompts import template
from dare.harness.verifiers import verifiers
from dare.trainers import build_algorithm, build_estimator
from dare.trainers.cli import main
from dare.trainers.preference.build import build_pairs
from dare.trainers.preference.pairs import preference_items, read_pairs
from dare.trainers.training.config import resolve_algorithm
from dare.trainers.training.evaluate import read_eval_marker

from .toy import ContextFreePolicy, JointPolicy, make_batch

RESPONSE = [2, 0, 1, 2]
CHOSEN, REJECTED = [0, 1, 2, 3, 0], [3, 3, 1, 0, 2]


def _pair_batch(prompt_len: int = 1):
    """One (chosen, rejected) pair as interleaved rows 0 and 1."""
    batch = make_batch(2, prompt_len, CHOSEN)
    batch.completion_ids[1] = torch.tensor(REJECTED)
    batch.group_ids = torch.zeros(2, dtype=torch.long)
    return batch


def _exact_logp(policy: ContextFreePolicy, tokens: list[int]) -> torch.Tensor:
    return policy.logits.detach().log_softmax(-1)[torch.arange(len(tokens)), torch.tensor(tokens)].sum()


def _prepared(name: str, settings: dict, policy, reference, batch, seed: int = 0):
    """The algorithm bound, the batch with its noise and the reference's estimates (as the trainer does)."""
    algo = build_algorithm(name, settings)
    algo.bind("bidirectional")
    gen = torch.Generator().manual_seed(seed)
    batch.noise = algo.draw_noise(algo.estimator, batch, gen)
    with torch.no_grad():
        batch.ref_logp = torch.stack([algo.estimator.estimate(reference, batch, n).token_logp for n in batch.noise])
    return algo


# ------------------------------------------------------------------ the stratified estimator
def _counts(est, batch, seed=0):
    noise = est.draw(batch, torch.Generator().manual_seed(seed))
    length = batch.completion_mask.sum(1, keepdim=True).double()
    return torch.round(noise["t"] * length).long(), noise


def test_stratified_counts_lie_in_range_and_cover_the_strata():
    est = build_estimator("stratified_elbo", {"samples": 4})
    counts, noise = _counts(est, make_batch(5000, 1, [1] * 13))  # 13 / 4 strata: offsets 0, 3, 6, 9
    assert counts.min() >= 1 and counts.max() <= 13
    assert torch.equal(noise["masked"].sum(-1), counts)  # exactly x_j tokens masked in draw j
    steps = (counts.roll(-1, 1) - counts) % 13  # cyclic gaps between consecutive strata
    assert set(steps[:, :3].flatten().tolist()) <= {3, 4} and steps.sum(1).eq(13).all()
    assert all(len(set(row)) == 4 for row in counts.tolist())  # n distinct timesteps
    for j in range(4):  # each draw alone is uniform on 1..L_v (what makes every draw unbiased)
        freq = torch.bincount(counts[:, j], minlength=14)[1:].double() / 5000
        assert (freq - 1 / 13).abs().max() < 0.02, (j, freq)


def test_stratified_masks_respect_padding_and_the_uncounted_tail():
    est = build_estimator("stratified_elbo", {"samples": 3})
    batch = make_batch(64, 2, [1] * 10)
    batch.completion_mask[:, 5:] = False  # 5..6: tail after EOS, seen by the model but not counted
    batch.completion_attn[:, 7:] = False  # 7..9: right padding the model never sees
    counts, noise = _counts(est, batch, seed=1)
    masked = noise["masked"]
    assert not masked[..., 7:].any() and masked[..., 5:7].all()
    assert torch.equal(masked[..., :5].sum(-1), counts) and counts.max() <= 5


@pytest.mark.parametrize("name, block", [("stratified_elbo", None), ("block_stratified_elbo", 2)])
def test_each_stratified_draw_is_unbiased_for_exact_conditionals(name, block):
    policy = JointPolicy(n=4, vocab=3, block_size=block, seed=2)
    est = build_estimator(name, {"samples": 4})
    batch = make_batch(6000, 1, RESPONSE)
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    masked = noise["masked"].transpose(0, 1)
    per_draw = (est._forward(policy, batch, masked).token_logp.double() * masked / noise["t"].T[..., None]).sum(-1)
    truth = policy.log_prob(RESPONSE)
    for j in range(4):
        mean, se = float(per_draw[j].mean()), float(per_draw[j].std() / math.sqrt(6000))
        assert abs(mean - truth) < 4.5 * se + 1e-6, (j, mean, truth, se)
    combined = est.estimate(policy, batch, noise).token_logp.double().sum(-1)
    assert combined.var() < per_draw[0].var() / 2  # stratification: variance well below a single draw's


def test_shared_noise_makes_the_policy_minus_reference_difference_low_variance():
    reference = ContextFreePolicy(n=8, vocab=4, seed=0)
    policy = ContextFreePolicy(n=8, vocab=4, seed=0)
    est = build_estimator("stratified_elbo", {"samples": 2})
    batch = make_batch(4000, 1, [0, 1, 2, 3, 3, 2, 1, 0])
    a, b = (est.draw(batch, torch.Generator().manual_seed(s)) for s in (0, 1))
    with torch.no_grad():
        same = (est.estimate(policy, batch, a).token_logp.sum(-1)
                - est.estimate(reference, batch, a).token_logp.sum(-1))
        assert float(same.abs().max()) == 0.0  # theta == ref: the shared-noise difference is exactly 0
        policy.logits.add_(0.1 * torch.randn(8, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
        shared = (est.estimate(policy, batch, a).token_logp.sum(-1)
                  - est.estimate(reference, batch, a).token_logp.sum(-1))
        apart = (est.estimate(policy, batch, a).token_logp.sum(-1)
                 - est.estimate(reference, batch, b).token_logp.sum(-1))
        truth = float(_exact_logp(policy, batch.completion_ids[0].tolist())
                      - _exact_logp(reference, batch.completion_ids[0].tolist()))
    assert abs(float(shared.mean()) - truth) < 4.5 * float(shared.std()) / math.sqrt(4000)  # still unbiased
    assert float(shared.var()) < 0.02 * float(apart.var()), (float(shared.var()), float(apart.var()))


# ------------------------------------------------------------------ the loss
@pytest.mark.parametrize("name", ["vrpo", "dpo"])
def test_the_loss_of_one_pair_equals_the_hand_computed_value(name):
    policy, reference = ContextFreePolicy(n=5, vocab=4, seed=0), ContextFreePolicy(n=5, vocab=4, seed=3)
    batch = _pair_batch()
    algo = _prepared(name, {"beta": 0.3}, policy, reference, batch)
    out = algo.loss(policy, batch, 0)

    def elbo(model, row, noise):  # sum over masked positions of log p / t, averaged over draws
        lp = model.logits.detach().log_softmax(-1)[torch.arange(5), batch.completion_ids[row]]
        return float((noise["masked"][row] * lp / noise["t"][row][:, None]).sum(-1).mean())

    pol, ref = batch.noise[0], batch.noise[0 if name == "vrpo" else 1]
    margin = 0.3 * ((elbo(policy, 0, pol) - elbo(reference, 0, ref)) - (elbo(policy, 1, pol) - elbo(reference, 1, ref)))
    assert out.loss.item() == pytest.approx(math.log1p(math.exp(-margin)), rel=1e-9)
    assert out.weight == 1.0 and out.metrics["reward_margin"] == pytest.approx(margin, rel=1e-9)


def test_the_loss_is_log_two_when_the_policy_is_the_reference():
    policy = ContextFreePolicy(n=5, vocab=4, seed=0)
    batch = _pair_batch()
    assert _prepared("vrpo", {}, policy, policy, batch).loss(policy, batch, 0).loss.item() == math.log(2)
    batch = _pair_batch()  # plain DPO: the reference's independent draw leaves noise in the margin
    assert _prepared("dpo", {}, policy, policy, batch).loss(policy, batch, 0).loss.item() != math.log(2)


@pytest.mark.parametrize("name", ["vrpo", "dpo"])
def test_a_gradient_step_widens_the_chosen_minus_rejected_margin(name):
    policy, reference = ContextFreePolicy(n=5, vocab=4, seed=1), ContextFreePolicy(n=5, vocab=4, seed=1)
    before = float(_exact_logp(policy, CHOSEN) - _exact_logp(policy, REJECTED))
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
    for step in range(5):
        batch = _pair_batch()
        algo = _prepared(name, {"samples": 4}, policy, reference, batch, seed=step)
        optimizer.zero_grad()
        algo.loss(policy, batch, 0).loss.backward()
        optimizer.step()
    after = float(_exact_logp(policy, CHOSEN) - _exact_logp(policy, REJECTED))
    assert after > before + 0.5, (before, after)


def test_dare_length_normalisation_is_beta_over_length():
    policy, reference = ContextFreePolicy(n=5, vocab=4, seed=0), ContextFreePolicy(n=5, vocab=4, seed=4)
    name, dare = resolve_algorithm("vrpo_dare", {})
    losses = {}
    for label, settings in {"paper": {}, "dare": dare, "scaled": {"beta": 0.2 / 512}}.items():
        batch = _pair_batch()
        losses[label] = _prepared(name, settings, policy, reference, batch).loss(policy, batch, 0).loss.item()
    assert losses["dare"] != pytest.approx(losses["paper"], rel=1e-3)
    assert losses["dare"] == pytest.approx(losses["scaled"], rel=1e-12)


def test_a_micro_batch_that_splits_a_pair_is_refused():
    policy = ContextFreePolicy(n=5, vocab=4)
    batch = _pair_batch()
    algo = _prepared("vrpo", {}, policy, policy, batch)
    with pytest.raises(ConfigError, match="even"):
        algo.loss(policy, batch.select(slice(0, 1)), 0)


# ------------------------------------------------------------------ the data
GOOD = {"id": "p1", "benchmark": "sudoku", "prompt": "Solve the following Sudoku puzzle: 0", "chosen": "a",
        "rejected": "b", "metadata": {"puzzle": "0"}}


@pytest.mark.parametrize("line, message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "rejected"}), "rejected: Field required"),
    (json.dumps({**GOOD, "score": 1}), "score: Extra inputs are not permitted"),
    (json.dumps({**GOOD, "rejected": "a"}), "chosen and rejected are identical"),
    (json.dumps({**GOOD, "rejected": "  "}), "rejected: Value error, must not be blank"),
])
def test_a_malformed_line_is_one_error_line_with_its_number(tmp_path, line, message):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + line + "\n")
    with pytest.raises(DataError) as err:
        read_pairs(path)
    text = str(err.value)
    assert text.startswith("pairs.jsonl line 3: ") and message in text and "\n" not in text, text


def test_pairs_must_name_a_benchmark_of_the_suite(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({**GOOD, "benchmark": "gsm8k"}) + "\n")
    with pytest.raises(DataError, match="not in suite 'sudoku'"):
        preference_items("sudoku", str(path))
    with pytest.raises(DataError, match="no shipped preference pairs for gsm8k"):
        preference_items("gsm8k")


@pytest.mark.parametrize("benchmark", ["sudoku", "countdown"])
def test_shipped_pairs_are_graded_by_the_real_verifier_and_rendered_like_evaluation(benchmark):
    spec = hcfg.benchmark(benchmark)
    items = preference_items(benchmark)
    assert len(items) == 128 and len({it.record.sample_id for it in items}) == 128
    verifier = verifiers.get(spec.verifier)(**spec.verifier_args)
    train = {s.id: s for s in load_samples(spec.train)}
    for it in items:
        sample = train[it.record.sample_id]
        assert verifier(sample, it.record.chosen).passed and not verifier(sample, it.record.rejected).passed
        assert it.messages == template(spec.prompt).render(sample)  # the evaluation prompt, exactly
    rebuilt = build_pairs(benchmark, 5)  # the generator is deterministic (a smaller count is a prefix)
    assert [r.model_dump() for r in rebuilt] == [it.record.model_dump() for it in items[:5]]
    assert (DATA_DIR / f"{benchmark}_preference.jsonl").stat().st_size < 100_000


# ------------------------------------------------------------------ end to end
SHORT = ["--steps", "2", "--set", "prompts_per_step=2", "--set", "micro_batch_size=2", "--set", "decoding.gen_length=8",
         "--set", "decoding.steps=8", "--set", "decoding.block_length=4", "--set", "lr=1e-3"]


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_vrpo_trains_tiny_llada_on_sudoku_pairs_and_evaluates(tmp_path):
    assert main(["--algo", "vrpo", "--model", "tiny-llada", "--suite", "sudoku", "--out", str(tmp_path), *SHORT,
                 "--eval-limit", "2"]) == 0
    run_dir = tmp_path / "vrpo-sudoku-tiny-llada-s0"
    rows = _rows(run_dir)
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["dpo_loss"] == pytest.approx(math.log(2), abs=1e-6)  # policy == reference before the update
    assert rows[1]["dpo_loss"] != rows[0]["dpo_loss"] and "ref_logp" in rows[0]["time"]
    eval_dir = read_eval_marker(run_dir)
    record = json.loads((eval_dir / "run.json").read_text())
    assert record["status"] == "complete" and record["model"]["training"]["algorithm"] == "vrpo"


@pytest.mark.parametrize("algo, model, suite", [
    ("dpo", "tiny-sdar", "sudoku"),
    pytest.param("dpo", "tiny-llada", "countdown", marks=pytest.mark.slow),
    pytest.param("vrpo", "tiny-sdar", "planning", marks=pytest.mark.slow),
    pytest.param("vrpo_dare", "tiny-llada", "sudoku", marks=pytest.mark.slow),
])
def test_preference_algorithms_train_two_steps(tmp_path, algo, model, suite):
    assert main(["--algo", algo, "--model", model, "--suite", suite, "--out", str(tmp_path), *SHORT, "--no-eval"]) == 0
    rows = _rows(tmp_path / f"{algo}-{suite}-{model}-s0")
    assert [r["step"] for r in rows] == [1, 2] and all(math.isfinite(r["loss"]) for r in rows)
    if algo != "dpo":  # shared noise: exactly log 2 at the first step
        assert rows[0]["dpo_loss"] == pytest.approx(math.log(2), abs=1e-6)
