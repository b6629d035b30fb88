"""DARE's reward function inside verl's own reward path: ``reward.custom_reward_function`` loaded by verl's
loader and called by verl's NaiveRewardManager (what ``main_ppo`` runs after each rollout), on DARE rows
written by ``to_verl_row``, graded by the real verifiers (math-verify, Countdown, Sudoku, the code sandbox)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.workers.reward_manager.naive import NaiveRewardManager  # noqa: E402

from dare.harness import config  # noqa: E402
from dare.harness.config import SHIPPED_CONFIGS  # noqa: E402
from dare.harness.data import load_samples  # noqa: E402
from dare.harness.errors import ConfigError  # noqa: E402
from dare.trainers.verl.reward import compute_score, to_verl_row, verifier_for  # noqa: E402

TOKENIZER = SHIPPED_CONFIGS / "models" / "tiny-sdar"  # a byte-level BPE: decode(encode(text)) == text


def first(benchmark: str, i: int = 0):
    return load_samples(config.benchmark(benchmark).data)[i]


def sudoku_one_wrong() -> str:
    """Sudoku test/0 (8 empty cells) solved except one empty cell: d1's reward is 7/8 = 0.875."""
    sample = first("sudoku")
    assert sample.metadata["puzzle"] == "3102200002100320" and sample.reference == "3142243142131324"
    return "<answer>\n3112243142131324\n</answer>"  # cell 2 (empty in the puzzle) is 1, not 4


def cases():
    """(benchmark, sample, completion, expected reward under the published rule, under the exact score)."""
    math, countdown, humaneval = first("math500"), first("countdown"), first("humaneval")
    return [
        ("math500", math, verifier_for("math500").gold_completion(math), 1.0, 1.0),
        ("math500", math, "The answer is \\boxed{123456789}.", 0.0, 0.0),
        ("countdown", countdown, verifier_for("countdown").gold_completion(countdown), 1.0, 1.0),
        ("countdown", countdown, "<answer>30 + 100 + 93</answer>", 0.1, 0.0),  # TinyZero: 0.1 for a wrong answer
        ("countdown", countdown, "no answer here", 0.0, 0.0),
        ("sudoku", first("sudoku"), sudoku_one_wrong(), 0.875, 0.0),
        ("humaneval", humaneval, humaneval.reference, 1.0, 1.0),
        ("humaneval", humaneval, "    return None\n", 0.0, 0.0),
    ]


def verl_batch(tokenizer, rows: list[dict], completions: list[str]) -> DataProto:
    """What main_ppo hands the reward manager: left-padded prompts, right-padded responses, the row's fields."""
    prompts = [tokenizer(r["prompt"][-1]["content"])["input_ids"] for r in rows]
    responses = [tokenizer(c)["input_ids"] for c in completions]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id or 0
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    mask = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r))
                         for p, r in zip(prompts, responses)])
    return DataProto.from_dict(
        tensors={"prompts": prompt_ids, "responses": response_ids, "attention_mask": mask},
        non_tensors={key: np.array([r[key] for r in rows], dtype=object)
                     for key in ("data_source", "reward_model", "extra_info")})


@pytest.mark.parametrize("reward", ["rule", "score"])
def test_verl_loads_compute_score_and_its_reward_manager_gets_dare_rewards(reward):
    cfg = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://dare.trainers.verl.reward", "name": "compute_score", "reward_kwargs": {"reward": reward}}}})
    fn = get_custom_reward_fn(cfg)  # verl's own loader, as main_ppo calls it
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
    table = cases()
    rows = [to_verl_row(bench, sample, index=i) for i, (bench, sample, *_) in enumerate(table)]
    data = verl_batch(tokenizer, rows, [c for _, _, c, _, _ in table])
    out = NaiveRewardManager(tokenizer, num_examine=0, compute_score=fn)(data, return_dict=True)
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:].sum(1)
    rewards = out["reward_tensor"][torch.arange(len(table)), lengths - 1].tolist()  # on the last response token
    expected = [rule if reward == "rule" else score for *_, rule, score in table]
    assert rewards == pytest.approx(expected), list(zip([c[0] for c in table], rewards, expected))
    assert out["reward_extra_info"]["acc"] == [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert out["reward_extra_info"]["dare_error"] == [0.0] * len(table)


def test_each_reward_equals_the_dare_verifier_and_tinyzero_rows_are_read():
    for bench, sample, completion, *_ in cases():
        verifier = verifier_for(bench)
        verdict = verifier.verify(sample, completion)
        row = to_verl_row(bench, sample)
        got = compute_score(row["data_source"], completion, row["reward_model"]["ground_truth"], row["extra_info"])
        assert got["score"] == verifier.reward(verdict) and got["dare_score"] == verdict.score, (bench, completion)
    countdown = first("countdown")  # verl/TinyZero's Countdown rows: ground_truth {"target", "numbers"}, no extra_info
    gold = verifier_for("countdown").gold_completion(countdown)
    truth = {"target": countdown.metadata["target"], "numbers": countdown.metadata["numbers"]}
    assert compute_score("countdown", gold, truth)["score"] == 1.0
    with pytest.raises(ConfigError, match="data_source 'countdwn' names no DARE benchmark; did you mean 'countdown'"):
        compute_score("countdwn", gold, truth)
