"""``extra.KEY=VALUE``: a decoder's option named the way every other setting is, in --set and in the pairs that
lm-eval's ``--model_args`` and inspect's ``-M`` hand over (harness/overrides.py, one grammar)."""

from __future__ import annotations

import pytest

import dare
from dare.harness import cli
from dare.harness.errors import ConfigError
from dare.harness.overrides import EVAL, parse

SUDOKU = dict(suite="sudoku", limit=1)


def _plan(tmp_path, model, *overrides):
    return dare.plan(model=model, overrides=list(overrides), out=tmp_path, **SUDOKU)


@pytest.mark.parametrize("model, dotted, json_form", [
    ("tiny-llada", ["remasking=d3llm", "extra.d3llm_entropy_threshold=0.37"],
     ["remasking=d3llm", 'extra={"d3llm_entropy_threshold": 0.37}']),
    ("tiny-llada", ["extra.torch.step_schedule=ascending"], ['extra={"torch": {"step_schedule": "ascending"}}']),
])
def test_the_dotted_spelling_plans_what_the_json_form_plans(tmp_path, model, dotted, json_form):
    a, b = _plan(tmp_path, model, *dotted), _plan(tmp_path, model, *json_form)
    assert a.decoding.config_hash() == b.decoding.config_hash()
    assert a.decoder_options == b.decoder_options
    # the value reached the decoder's typed options (0.37 is not d3llm's default threshold)
    assert a.decoder_options != _plan(tmp_path, model, *dotted[:-1]).decoder_options


def test_both_spellings_add_up_in_either_order():
    want = {"extra": {"a": 1, "b": 2.5, "torch": {"c": "x"}}}
    assert parse(['extra={"a": 1}', "extra.b=2.5", "extra.torch.c=x"]).decoding == want
    assert parse(["extra.b=2.5", "extra.torch.c=x", 'extra={"a": 1}']).decoding == want


def test_pairs_typed_by_another_tool_read_as_the_command_line_reads_text():
    assert EVAL.parse_pairs([("extra.a", 0.5), ("steps", "8"), ("extra", {"b": True})]) == \
        EVAL.parse(["extra.a=0.5", "steps=8", "extra.b=true"])


def test_an_option_of_another_decoder_is_refused_naming_the_decoder_that_reads_it(capsys, tmp_path):
    code = cli.main(["--model", "tiny-llada", "--suite", "sudoku", "--limit", "1", "--out", str(tmp_path),
                     "--dry-run", "--set", "extra.d3llm_entropy_threshold=0.5"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert ("extra.d3llm_entropy_threshold is not an option of decoder mdm:low_confidence "
            "(it is read by mdm:d3llm)") in err


def test_an_unknown_section_names_extra_among_the_choices():
    with pytest.raises(ConfigError, match=r"unknown setting 'extr.x' \(use a decoding field, extra.OPTION"):
        parse(["extr.x=1"])
