"""ReMix (mdm:remix) against the authors' code, the network's inputs_embeds path, its options and its refusals.

Fixture tests/backends/fixtures/remix_official.json (regenerate with fixtures/scripts/make_remix_fixture.py):
Serpientw/ReMix-DLLM ``LLaDA/model/decoding.py::decoding_remix`` (commit
aea1fd91a90d9de8487ea01529359aa4ce118a14) run with the shipped tiny-llada network with seeded weight noise
(tests/backends/strategy_model.py; float32, CPU) in place of the Hugging Face model on Sudoku prompts 0-2,
greedy, batch 1. NFE is the model calls (the reference's returned ``steps``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .strategy_model import assert_dry_run_refused, noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "remix_official.json").read_text())
KEYS = ("gen_length", "block_length", "threshold", "js_threshold", "beta_mix")
SETTINGS = sorted({tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]})


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()  # the fixture's network (see strategy_model.py)


def _extra(setting, **changes):
    return {"remix_threshold": setting[2], "remix_js_threshold": setting[3], "remix_beta": setting[4], **changes}


def _decode(model, name, cases, extra, **fields):
    first = cases[0]
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["gen_length"], block_length=first["block_length"],
                         remasking=name.split(":")[1], extra=extra, **fields)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decoders.get(name)(model, canvas, cfg, [torch.Generator().manual_seed(0) for _ in cases])


def _cases(setting):
    return [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]


def test_inputs_embeds_equal_the_embedding_lookup(llada):
    ids = torch.tensor([OFFICIAL["cases"][0]["prompt_ids"]])
    positions = torch.arange(ids.shape[1])[None]
    with torch.inference_mode():
        plain = llada.net(ids, positions, None, logits_range=(3, 9))
        embedded = llada.net(None, positions, None, logits_range=(3, 9), inputs_embeds=llada.net.embed(ids))
    assert plain.shape == (1, 6, llada.net.args.vocab_size) and torch.equal(plain, embedded)


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"gen{s[0]}-block{s[1]}-tau{s[2]}-js{s[3]}-beta{s[4]}")
def test_tokens_and_nfe_equal_the_authors_code_batched(llada, setting):
    cases = _cases(setting)
    ours = _decode(llada, "mdm:remix", cases, _extra(setting))  # one left-padded batch: rows stay independent
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases] == [c["steps"] for c in cases]


def _changed(llada, **changes):
    """How many fixture rows change when the options change."""
    changed = 0
    for setting in SETTINGS:
        cases = _cases(setting)
        tokens = _decode(llada, "mdm:remix", cases, _extra(setting, **changes)).tokens.tolist()
        changed += sum(t != c["tokens"] for t, c in zip(tokens, cases))
    return changed


def test_the_soft_inputs_and_the_rejections_change_the_tokens(llada):
    """With beta 0 every input is a plain mask, with an unreachable JS threshold nothing is rejected: the same
    commit rule, other tokens, so parity needs both steps."""
    assert _changed(llada, remix_beta=0.0) >= 10
    assert _changed(llada, remix_js_threshold=10.0) >= 2
    cases = _cases(SETTINGS[0])
    low = _decode(llada, "mdm:low_confidence", cases, {})  # one token per step
    assert low.tokens.tolist() != [c["tokens"] for c in cases]


def test_the_quirk_option_keeps_rejected_rows_rejected(llada):
    from dare.backends.decoding.remix import js_divergence

    probs = torch.softmax(torch.randn(4, 832, generator=torch.Generator().manual_seed(0)), -1)
    assert (js_divergence(torch.zeros_like(probs), probs) - 0.5 * torch.log(torch.tensor(2.0))).abs().max() < 0.01
    setting = next(s for s in SETTINGS if s[3] < 0.1)  # rejections are frequent: re-rejecting a zeroed row matters
    cases = _cases(setting)
    fresh = _decode(llada, "mdm:remix", cases, _extra(setting, remix_official_quirk=False))
    assert fresh.tokens.tolist() != [c["tokens"] for c in cases]


def test_options_reads_and_record_key(tmp_path):
    from dare.harness.plan import plan

    decode = decoders.get("mdm:remix")
    defaults = decode.Options().identity()
    assert (defaults["remix_threshold"], defaults["remix_js_threshold"], defaults["remix_beta"]) == (0.9, 0.3, 0.5)
    assert defaults["remix_official_quirk"] is True
    assert {"steps", "temperature", "threshold", "cfg_scale"}.isdisjoint(decode.reads)
    base = ["remasking=remix", "gen_length=16", "block_length=16"]
    runs = {beta: plan("tiny-llada", "sudoku", overrides=[*base, f"extra={{remix_beta: {beta}}}"], limit=1,
                       out=tmp_path) for beta in (0.5, 0.7)}
    assert runs[0.5].generation_key() != runs[0.7].generation_key()


def test_the_frontier_sets_no_steps_for_remix():
    """benchmarks/decode_frontier.py passes each strategy only the common settings its decoder reads."""
    import argparse
    import runpy

    frontier = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "decode_frontier.py"))
    args = argparse.Namespace(gen_length=160, block_length=32, batch=4)
    assert frontier["common_settings"]("tiny-llada-long", ["remasking=remix"], args) == [
        "gen_length=160", "block_length=32", "batch_size=4"]
    assert "steps=160" in frontier["common_settings"]("tiny-llada-long", ["remasking=low_confidence"], args)


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-dream", "--set", "remasking=remix"], "not available for dream"),
    (["--model", "tiny-llada", "--set", "remasking=remix", "--set", "extra={remix_bta: 0.3}"],
     "did you mean 'remix_beta'"),
    (["--model", "tiny-llada", "--set", "remasking=remix", "--set", "temperature=0.7"],
     "not read by decoder mdm:remix"),
    (["--model", "tiny-llada", "--engine", "fastdllm", "--set", "remasking=remix", "--set", "cache=dual"], "cache")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)


@pytest.mark.slow
@pytest.mark.parametrize("model,suite", [("tiny-llada", "sudoku"), ("tiny-llada-long", "long_canvas")])
def test_runs_through_the_engine_with_its_defaults(tmp_path, model, suite):
    """tiny-llada-long: 5 blocks of 32, so the default steps (256) has no schedule; ReMix does not read it."""
    from dare.harness.plan import evaluate, plan

    run = plan(model, suite, overrides=["remasking=remix"], limit=2, out=tmp_path)
    evaluate(run)
    record = json.loads((run.run_dir / "run.json").read_text())
    assert record["decoder"]["name"] == "mdm:remix" and record["decoder"]["options"]["remix_beta"] == 0.5
    assert next(iter(record["metrics"].values()))["accuracy"]["value"] > 0
