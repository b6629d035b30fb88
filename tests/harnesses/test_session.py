"""One spelling everywhere: the settings lm-eval's ``--model_args`` and inspect's ``-M`` hand over (already split,
values typed by those tools) resolve to the decoding ``dare-eval --set`` resolves from text."""

from __future__ import annotations

import pytest

import dare
from dare.backends.harnesses.session import Session
from dare.harness.errors import ConfigError


@pytest.mark.parametrize("typed, text", [
    ({"remasking": "d3llm", "extra.d3llm_entropy_threshold": 0.37, "steps": 16},
     ["remasking=d3llm", "extra.d3llm_entropy_threshold=0.37", "steps=16"]),
    ({"extra.torch.step_schedule": "ascending", "engine.dtype": "float32"},
     ["extra.torch.step_schedule=ascending", "engine.dtype=float32"]),
])
def test_a_session_resolves_what_dare_eval_resolves(tmp_path, typed, text):
    session = Session({"model": "tiny-llada", "out": str(tmp_path), **typed}, source="--model_args")
    plan = dare.plan(model="tiny-llada", suite="sudoku", limit=1, overrides=text, out=tmp_path)
    run = session.decoding({})
    assert run.config.config_hash() == plan.decoding.config_hash()
    assert run.options == plan.decoder_options and session.engine.options == plan.engine.options


def test_a_task_setting_gives_way_to_the_user_s(tmp_path):
    session = Session({"model": "tiny-llada", "out": str(tmp_path), "gen_length": 64}, source="--model_args")
    assert session.decoding({"gen_length": 32, "temperature": 0.5}).config.gen_length == 64
    assert session.decoding({"gen_length": 32, "temperature": 0.5}).config.temperature == 0.5


@pytest.mark.parametrize("settings, message", [
    ({"verifier.fallback": "none"}, "--model_args: verifier.fallback: the calling harness scores with its own"),
    ({"stepz": 4}, "--model_args: unknown setting 'stepz'; did you mean steps?"),
    ({"likelihood.mod": "exact"}, "--model_args: likelihood.mod: unknown option; did you mean 'mode'?"),
])
def test_a_bad_setting_is_one_line_naming_it(tmp_path, settings, message):
    with pytest.raises(ConfigError) as err:
        Session({"model": "tiny-sdar", "out": str(tmp_path), **settings}, source="--model_args")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_authors_harness_arguments_are_answered_with_dare_s_spelling(tmp_path):
    """LLaDA's recipe passes ``cfg=0.5,is_check_greedy=False,mc_num=128`` to its own lm-eval class
    (ML-GSAI/LLaDA@b7e6c35 eval_llada_lm_eval.sh); Dream's takes ``pretrained=`` and ``nll_type=``. Each is
    refused (one spelling everywhere) with the spelling that works here, and that spelling is accepted."""
    authors = {"cfg": 0.5, "is_check_greedy": False, "mc_num": 128, "pretrained": "x", "nll_type": "ar_ftb"}
    with pytest.raises(ConfigError) as err:
        Session({"model": "tiny-llada", "out": str(tmp_path), **authors}, source="--model_args")
    assert str(err.value) == ("--model_args: unknown setting 'cfg'; did you mean likelihood.cfg?; unknown setting "
                              "'is_check_greedy'; did you mean likelihood.check_greedy?; unknown setting 'mc_num'; "
                              "did you mean likelihood.mc_num?; unknown setting 'pretrained'; did you mean "
                              "model_path?; unknown setting 'nll_type'; did you mean likelihood.estimator=dream_mc "
                              "or likelihood.estimator=dream_ar?")
    session = Session({"model": "tiny-llada", "out": str(tmp_path), "likelihood.cfg": 0.5,
                       "likelihood.check_greedy": False, "likelihood.mc_num": 128, "likelihood.batch": 8},
                      source="--model_args")
    assert session.estimator().options.model_dump() == {"mc_num": 128, "batch": 8, "cfg": 0.5,
                                                        "check_greedy": False, "max_length": 4096}
