"""Shipped algorithm presets and experiment configs validate; the SFT loss normalisations; the rollout-copy
log-prob consistency metric."""

from __future__ import annotations

import json

import pytest
import torch

from dare.harness.errors import ConfigError
from dare.trainers import build_algorithm
from dare.trainers.cli import main
from dare.trainers.experiments.compare import ComparisonRunner, load_comparison
from dare.trainers.training.config import TrainConfig, catalog, load_experiment, preset_names, resolve_algorithm

from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)
from .toy import ContextFreePolicy, make_batch


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_builds(name):
    algo, settings = resolve_algorithm(name, {})
    assert build_algorithm(algo, settings).config.model_dump()


@pytest.mark.parametrize("name", sorted(catalog("experiments")))
def test_every_experiment_config_validates(name, tmp_path):
    if name.startswith("compare_"):  # every run of a comparison, its start and model family included
        comparison, _ = load_comparison(name)
        assert ComparisonRunner(comparison, tmp_path, []).configs
        with pytest.raises(ConfigError, match="run it with dare-train --compare"):
            load_experiment(name, {})
        return
    config = load_experiment(name, {})
    algo, settings = resolve_algorithm(config.algorithm, config.algorithm_settings)
    build_algorithm(algo, settings)


def test_fingerprint_ignores_settings_left_at_their_defaults():
    """A field added with the old behaviour as its default keeps earlier runs resumable."""
    plain = TrainConfig(algorithm="d1", suite="sudoku")
    assert TrainConfig(algorithm="d1", suite="sudoku", reward="task", lora_backend="builtin").fingerprint() == \
        plain.fingerprint()
    assert TrainConfig(algorithm="d1", suite="sudoku", reward="score").fingerprint() != plain.fingerprint()


def test_a_run_saved_by_an_older_version_resumes_when_its_settings_are_the_same(tmp_path):
    from dare.trainers.state.checkpoint import check_same_run

    config = TrainConfig(algorithm="d1", suite="sudoku", lr=3e-6)
    saved = config.model_dump(mode="json")
    del saved["reward"]  # a field this version added
    (tmp_path / "train_config.json").write_text(json.dumps({"fingerprint": "0ld5cheme0000000", "config": saved}))
    check_same_run(tmp_path, config.fingerprint(), config.model_dump(mode="json"))  # accepted
    other = config.model_copy(update={"lr": 1e-5})
    with pytest.raises(ConfigError, match="different settings"):
        check_same_run(tmp_path, other.fingerprint(), other.model_dump(mode="json"))


def test_unknown_algorithm_setting_is_reported():
    with pytest.raises(ConfigError, match="clip_lo"):
        build_algorithm("d1", {"clip_lo": 0.1})


@pytest.mark.parametrize("normalise", ["response_tokens", "masked_tokens"])
def test_sft_loss_is_the_weighted_masked_ce_over_the_chosen_count(normalise):
    algo = build_algorithm("sft", {"normalise": normalise, "estimator_args": {"samples": 2}})
    policy = ContextFreePolicy(n=5, vocab=4, prompt_len=2)
    algo.bind("bidirectional")
    batch = make_batch(3, 2, [0, 1, 2, 3, 0])
    batch.noise = [algo.estimator.draw(batch, torch.Generator().manual_seed(0))]
    out = algo.loss(policy, batch, 0)
    noise = batch.noise[0]
    lp = policy.logits.log_softmax(-1)[torch.arange(5), torch.tensor([0, 1, 2, 3, 0])]
    weighted = (noise["masked"] * lp / noise["t"][..., None]).mean(1)  # (B, T)
    count = 15.0 if normalise == "response_tokens" else float(noise["masked"].sum()) / 2
    assert torch.allclose(out.loss, -weighted.sum() / count)
    assert out.weight == count


def test_a_low_precision_rollout_copy_reports_its_log_prob_mismatch(tiny, tmp_path, digits_suite):  # noqa: F811
    args = ["--algo", "d1_dare", "--model-path", str(tiny["llada"]), "--suite", digits_suite, "--out", str(tmp_path),
            *FAST, "--steps", "1", "--set", "rollout_dtype=bfloat16"]
    assert main(args) == 0
    row = json.loads((tmp_path / f"d1_dare-{digits_suite}-llada-s0" / "metrics.jsonl").read_text())
    assert 0 < row["logp_mismatch_mean"] <= row["logp_mismatch_max"] < 1.0


@pytest.mark.slow
def test_sft_learns_the_answer_format(tiny, tmp_path):
    """30 SFT steps on Sudoku gold answers: the masked-diffusion loss falls (about 5.8 -> 2 on CPU, ~10 s)."""
    args = ["--algo", "sft", "--model-path", str(tiny["llada"]), "--suite", "sudoku", "--steps", "30", "--no-eval",
            "--set", "prompts_per_step=4", "--set", "micro_batch_size=4", "--set", "lr=3e-3",
            "--set", "warmup_steps=3", "--out", str(tmp_path)]
    assert main(args) == 0
    rows = [json.loads(x) for x in (tmp_path / "sft-sudoku-llada-s0" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["sft_loss"] for r in rows]
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5


def test_cosine_schedule_warms_up_then_decays_to_zero(tiny, tmp_path, capsys):
    args = ["--algo", "sft", "--model-path", str(tiny["llada"]), "--suite", "sudoku", "--out", str(tmp_path), *FAST,
            "--steps", "4", "--set", "warmup_steps=1", "--set", "lr_schedule=cosine"]
    assert main(args) == 0
    rows = [json.loads(x) for x in (tmp_path / "sft-sudoku-llada-s0" / "metrics.jsonl").read_text().splitlines()]
    lrs = [r["lr"] for r in rows]  # the rate for the next update, logged after each step
    assert lrs[0] == pytest.approx(1e-2) and lrs[1] == pytest.approx(1e-2 * 0.5 * (1 + 0.5))
    assert lrs[-1] == pytest.approx(0.0, abs=1e-12) and lrs == sorted(lrs, reverse=True)


def test_dare_compat_picks_the_dare_preset_or_says_which_exist(tiny, tmp_path, capsys):
    from dare.trainers.training.config import dare_preset

    assert dare_preset("d1") == "d1_dare" and dare_preset("d1_dare") == "d1_dare"
    assert dare_preset("diffu_grpo") == "d1_dare"  # an alias resolves through its algorithm
    args = ["--algo", "dipo", "--dare-compat", "--model-path", str(tiny["sdar"]), "--suite", "sudoku",
            "--out", str(tmp_path), *FAST]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "no DARE preset" in err and "d1" in err and err.count("\n") == 0


def test_masked_diffusion_sft_pads_answers_to_the_decoding_canvas(tiny):
    """LLaDA SFT trains the EOS padding up to the canvas the model decodes at evaluation."""
    from dare.backends.engines.torch import TorchEngine
    from dare.harness.engine import EngineContext
    from dare.trainers.training.data import train_items
    from dare.trainers.training.rollout import Verifiers, supervised_batch

    engine = TorchEngine(EngineContext(model_name="tiny", model_path=tiny["llada"]))
    items = train_items("sudoku")[:2]
    natural = supervised_batch(engine, items, Verifiers(), True)
    padded = supervised_batch(engine, items, Verifiers(), True, pad_to=natural.completion_ids.shape[1] + 20)
    assert padded.completion_ids.shape[1] == natural.completion_ids.shape[1] + 20
    tail = padded.completion_ids[:, natural.completion_ids.shape[1]:]
    assert (tail == engine.model.pad_id).all() and padded.completion_mask[:, -20:].all()


def test_training_attention_kernel_choice():
    from dare.trainers.training.policy import training_kernel

    assert training_kernel("auto", "block_causal", "cpu") is None  # SDPA: FlexAttention has no CPU backward
    assert training_kernel("auto", "bidirectional", "cuda") is None
    assert training_kernel("auto", "block_causal", "cuda") == "flex"
    with pytest.raises(ConfigError, match="CUDA device only"):
        training_kernel("flex", "block_causal", "cpu")
