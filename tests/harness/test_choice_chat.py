"""``choice.chat_template``: a choice benchmark's contexts as the user turn of the model's chat template, as
lm-eval's ``--apply_chat_template`` sends them (lm_eval 0.4.13 ``construct_requests``: no target delimiter before
the choice, which starts the assistant's answer). Real tiny-sdar, block_elbo in exact mode (no draws)."""

from __future__ import annotations

import json

import pytest

import dare
from dare.harness import config as hcfg
from dare.harness.choice import build_items
from dare.harness.data import load_rows
from dare.harness.errors import ConfigError
from dare.harness.likelihood import LikelihoodRequest

EXACT = ["likelihood.mode=exact"]


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return dare.plan(model="tiny-sdar", suite="sudoku_choice", limit=1, out=tmp_path_factory.mktemp("e")).engine


def test_a_chat_context_is_scored_as_the_templated_user_turn(engine):
    estimator = engine.likelihood_estimator("block_elbo", {"mode": "exact"})
    question, answer = "Solve the following Sudoku puzzle: 3102200002100320\n", "<answer>\n3142243142131324\n</answer>"
    templated = engine.model.tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                                           add_generation_prompt=True)
    assert templated.startswith("<|im_start|>user\n") and templated.endswith("<|im_start|>assistant\n")
    chat, by_hand, raw = engine.loglikelihood([LikelihoodRequest("a", question, answer, 0, chat=True),
                                               LikelihoodRequest("b", templated, answer, 0),
                                               LikelihoodRequest("c", question, answer, 0)], estimator)
    assert chat.logprob == by_hand.logprob != raw.logprob
    assert LikelihoodRequest("a", question, answer, 0, chat=True).key != LikelihoodRequest("a", question, answer, 0).key


def test_chat_continuations_drop_the_target_delimiter():
    spec = hcfg.benchmark("sudoku_choice")
    rows = load_rows(spec.data)[:2]
    raw, chat = build_items(spec, rows, [], 0), build_items(spec, rows, [], 0, chat=True)
    assert [c[1:] for c in raw[0].continuations] == list(chat[0].continuations) == rows[0]["choices"]
    assert raw[0].contexts == chat[0].contexts and raw[0].lengths == chat[0].lengths


def test_the_run_records_the_chat_template_and_scores_the_rendered_contexts(tmp_path, engine):
    plan = dare.plan(model="tiny-sdar", suite="sudoku_choice", limit=2, out=tmp_path,
                     overrides=[*EXACT, "choice.chat_template=true"])
    dare.evaluate(plan)
    record = json.loads((plan.run_dir / "run.json").read_text(encoding="utf-8"))
    assert record["benchmarks"]["sudoku_choice"]["fewshot"]["chat_template"] is True
    rows = [json.loads(line) for line in (plan.run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    estimator = engine.likelihood_estimator("block_elbo", {"mode": "exact"})
    first = rows[0]
    want = engine.loglikelihood([LikelihoodRequest(str(i), first["contexts"][0], c, 0, chat=True)
                                 for i, c in enumerate(first["continuations"])], estimator)
    assert first["logprobs"] == [r.logprob for r in want] and not first["continuations"][0].startswith(" ")
    raw = dare.plan(model="tiny-sdar", suite="sudoku_choice", limit=2, out=tmp_path / "raw", overrides=EXACT)
    assert raw.choices["sudoku_choice"].chat_template is False


def test_a_chat_template_setting_that_is_not_a_boolean_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"choice.chat_template='maybe' is not a boolean") as err:
        dare.plan(model="tiny-sdar", suite="sudoku_choice", limit=1, out=tmp_path,
                  overrides=["choice.chat_template=maybe"])
    assert "\n" not in str(err.value)


def test_a_model_without_a_chat_template_refuses_chat_contexts(tmp_path, engine, monkeypatch):
    monkeypatch.setattr(engine, "_templated", False)  # as a base checkpoint's config (chat_template: none) sets it
    estimator = engine.likelihood_estimator("block_elbo", {"mode": "exact"})
    with pytest.raises(ConfigError, match="has no chat template to put contexts in; drop choice.chat_template"):
        engine.loglikelihood([LikelihoodRequest("a", "q", "a", 0, chat=True)], estimator)
