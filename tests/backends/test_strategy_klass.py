"""KLASS (mdm:klass) against the authors' code, its options and its refusals.

Fixture tests/backends/fixtures/klass_official.json (regenerate with fixtures/scripts/make_klass_fixture.py):
shkim0116/KLASS ``src/model/llada_klass.py::stable_confident_decode`` (commit
ad87ecbe9fdef4a6e93701afbc150cb9213fbcd7, ``alg="klass"``, ``unmask_strategy="all"``) run with the shipped
tiny-llada network with seeded weight noise (tests/backends/strategy_model.py: the trained model is so sure of
Sudoku that every commit rule gives the same answer; float32, CPU) in place of the Hugging Face model on
Sudoku prompts 0-2, greedy; the reference's hard-coded mask id was mapped to the model's. NFE is the forwards
run (the reference's ``used_steps``): fewer than ``steps`` where stable commits fire.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .strategy_model import assert_dry_run_refused, noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "klass_official.json").read_text())
KEYS = ("gen_length", "steps", "block_length", "conf_threshold", "kl_threshold", "kl_history_length")
SETTINGS = sorted({tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]})


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()  # the fixtures' network (see strategy_model.py)


def _decode(model, name, cases, extra, **fields):
    first = cases[0]
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["steps"], block_length=first["block_length"],
                         remasking=name.split(":")[1], extra=extra, **fields)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decoders.get(name)(model, canvas, cfg, [torch.Generator().manual_seed(0) for _ in cases])


def _extra(setting):
    return {"klass_conf_threshold": setting[3], "klass_kl_threshold": setting[4], "klass_history": setting[5]}


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"block{s[2]}-tau{s[3]}-kl{s[4]}-h{s[5]}")
def test_tokens_and_nfe_equal_the_authors_code_batched(llada, setting):
    cases = [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]
    ours = _decode(llada, "mdm:klass", cases, _extra(setting))  # one left-padded batch: rows stay independent
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases]
    assert all(c["nfe"] < c["steps"] for c in cases)  # the stable-commit path fired
    plain = _decode(llada, "mdm:low_confidence", cases, {})
    assert plain.tokens.tolist() != [c["tokens"] for c in cases]
    strict = _decode(llada, "mdm:klass", cases, {**_extra(setting), "klass_kl_threshold": 0.0})
    assert strict.tokens.tolist() == plain.tokens.tolist()  # no position is ever stable: plain low confidence


def test_options_and_reads(llada):
    decode = decoders.get("mdm:klass")
    assert decode.Options().identity()["klass_history"] == 2
    assert {"threshold", "factor", "cache"}.isdisjoint(decode.reads)
    cases = OFFICIAL["cases"][:1]
    with pytest.raises(ConfigError, match="greedy"):
        _decode(llada, "mdm:klass", cases, {}, temperature=0.5)
    with pytest.raises(ConfigError, match="klass_history"):
        _decode(llada, "mdm:klass", cases, {"klass_history": 99})


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-sdar", "--set", "remasking=klass"], "not available for sdar"),
    (["--model", "tiny-llada", "--set", "remasking=klass", "--set", "extra={klass_histroy: 3}"],
     "did you mean 'klass_history'"),
    (["--model", "tiny-llada", "--engine", "fastdllm", "--set", "remasking=klass", "--set", "cache=dual"], "cache")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)

