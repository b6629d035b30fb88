"""DARE's verifiers as a reward function of verl's own trainer (``python -m verl.trainer.main_ppo``)::

    reward.custom_reward_function.path=pkg://dare.trainers.verl.reward
    reward.custom_reward_function.name=compute_score

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` once per response. Each
row's ``data_source`` names a DARE benchmark (``countdown``, ``dare/math500``, ``humaneval``, ...; or a verl
example source DARE grades, e.g. ``openai/gsm8k``: :data:`DATA_SOURCES`), ``ground_truth`` its answer (or
a dict of the row's fields, as TinyZero's Countdown ``{"target", "numbers"}``) and ``extra_info`` the rest
of the DARE row: ``numbers`` (countdown), ``puzzle`` (sudoku), ``entry_point`` and the tests (code).
:func:`to_verl_row` writes DARE's own data in exactly that form. Grading is the benchmark's own verifier
(math-verify, the Countdown and Sudoku checkers, the code sandbox), so verl's rewards are DARE's: the
reward is :meth:`Verifier.reward` (the task's published RL rule, as in ``dare-train``), or the exact score
with ``reward.custom_reward_function.reward_kwargs.reward=score``.
"""

from __future__ import annotations

import logging
from typing import Any

from dare.harness import config as cfg
from dare.harness.data import row_to_sample
from dare.harness.errors import ConfigError
from dare.harness.prompts import template
from dare.harness.records import Sample
from dare.harness.registry import did_you_mean, verifiers
from dare.harness.verifiers.base import Verifier

log = logging.getLogger(__name__)

# verl's example data sources (examples/data_preprocess) -> the DARE benchmark whose verifier grades them.
DATA_SOURCES = {"openai/gsm8k": "gsm8k", "lighteval/MATH": "math500", "DigitalLearningGmbH/MATH-lighteval": "math500",
                "HuggingFaceH4/MATH-500": "math500", "countdown": "countdown", "sudoku": "sudoku"}
REWARDS = ("rule", "score")
# What verl itself adds to extra_info (bookkeeping, not the row): kept out of the DARE sample.
VERL_KEYS = ("split", "index", "num_turns", "rollout_reward_scores")
_VERIFIERS: dict[str, Verifier] = {}  # one per benchmark and process: the code sandbox and math pool stay warm


def benchmark_of(data_source: str) -> str:
    """The DARE benchmark a verl ``data_source`` names (``dare/`` prefix optional)."""
    name = data_source[len("dare/"):] if data_source.startswith("dare/") else data_source
    name = DATA_SOURCES.get(name, name)
    known = cfg.names("benchmarks")
    if name not in known:
        raise ConfigError(f"data_source {data_source!r} names no DARE benchmark{did_you_mean(name, known)}; "
                          f"use one of {', '.join(known)} (optionally as dare/NAME)")
    return name


def verifier_for(benchmark: str) -> Verifier:
    if benchmark not in _VERIFIERS:
        spec = cfg.benchmark(benchmark)
        _VERIFIERS[benchmark] = verifiers.get(spec.verifier)(**spec.verifier_args)
    return _VERIFIERS[benchmark]


def sample_of(ground_truth: Any, extra_info: dict | None) -> Sample:
    """The DARE sample of a verl row: ``extra_info`` holds the row's fields, ``ground_truth`` its answer."""
    row = {k: v for k, v in (extra_info or {}).items() if k not in VERL_KEYS}
    if isinstance(ground_truth, dict):
        row.update(ground_truth)
        answer = ground_truth.get("answer", ground_truth.get("target", ground_truth.get("solution")))
    else:
        answer = ground_truth
    row["answer"] = answer if answer is None else str(answer)
    row.setdefault("id", str((extra_info or {}).get("index", "verl")))
    row.setdefault("prompt", "")
    return row_to_sample(row)


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                  reward: str = "rule", **_: Any) -> dict[str, float]:
    """``{"score": reward, "acc": passed, "dare_score": exact score, "dare_error": 1 if grading failed}``.

    verl trains on ``score`` and logs the other keys per step. A grading failure on DARE's side (a sandbox
    that could not start, a timed-out checker) is not the model's fault: it is logged, counted in
    ``dare_error`` and rewarded 0, never silently graded as a wrong answer.
    """
    if reward not in REWARDS:
        raise ConfigError(f"reward_kwargs.reward={reward!r} is not one of {', '.join(REWARDS)}")
    benchmark = benchmark_of(data_source)
    verifier = verifier_for(benchmark)
    sample = sample_of(ground_truth, extra_info)
    verdict = verifier.verify(sample, solution_str)
    if verdict.status == "error":
        log.warning("%s %s: grading failed (%s); reward 0", benchmark, sample.id, verdict.details.get("error"))
        return {"score": 0.0, "acc": 0.0, "dare_score": 0.0, "dare_error": 1.0}
    value = verifier.reward(verdict) if reward == "rule" else verdict.score
    return {"score": float(value), "acc": float(bool(verdict.passed)), "dare_score": float(verdict.score),
            "dare_error": 0.0}


def to_verl_row(benchmark: str, sample: Sample, split: str = "train", index: int = 0) -> dict[str, Any]:
    """One row of a verl RL parquet file for a DARE sample: the prompt rendered by the benchmark's own
    template as chat messages, and everything :func:`compute_score` needs to grade it."""
    spec = cfg.benchmark(benchmark)
    messages = template(spec.prompt).render(sample)
    return {"data_source": f"dare/{benchmark}", "prompt": [{"role": m.role, "content": m.content} for m in messages],
            "ability": spec.verifier, "reward_model": {"style": "rule", "ground_truth": sample.reference},
            "extra_info": {"split": split, "index": index, "id": sample.id, "prompt": sample.prompt, **sample.metadata}}
