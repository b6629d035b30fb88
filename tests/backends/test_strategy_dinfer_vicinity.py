"""dInfer's vicinity KV refresh (``dinfer_cache=vicinity`` of mdm:dinfer_threshold / credit / hierarchy) against the
authors' code.

Fixture tests/backends/fixtures/dinfer_vicinity_official.json (regenerate with fixtures/scripts/
make_dinfer_vicinity_fixture.py): inclusionAI/dInfer@fce4e32804103baa5d55230dff0352da0cdd6ceb,
``VicinityCacheDiffusionLLM.generate`` (generate_uniform.py ``VicinityCacheIteration``; utils.py dual
``DiffusionKVCacheManager``, ``KVCache.update``) with our network behind their model interface: the noisy tiny-llada
(tests/backends/strategy_model.py) on Sudoku prompts 0-2 (1 and 2 cut short, so each row's blocks are aligned
differently); batch 1 there, one left-padded batch here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding import dinfer_vicinity
from dare.backends.decoding.common import Canvas
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .strategy_model import assert_dry_run_refused, noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "dinfer_vicinity_official.json").read_text())
KEYS = ("decoder", "gen_length", "block_length", "threshold", "low_threshold", "maximum_unroll", "expected_tpf",
        "prefix_look", "after_look", "warmup_steps", "cache_update_freq")
LOOP = {"maximum_unroll": "dinfer_max_unroll", "expected_tpf": "dinfer_expected_tpf",
        "low_threshold": "dinfer_low_threshold"}
CACHE = {"prefix_look": "dinfer_prefix_look", "after_look": "dinfer_after_look",
         "warmup_steps": "dinfer_warmup_steps", "cache_update_freq": "dinfer_cache_update_freq"}


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()  # the fixture's network (see strategy_model.py)


def _groups():
    groups = {}
    for case in OFFICIAL["llada"]:
        case = dict(case, prompt_ids=OFFICIAL["llada_prompt_ids"][case["sample"]])
        groups.setdefault(tuple(case.get(k) for k in KEYS), []).append(case)
    return list(groups.values())


def _label(cases):
    return "-".join(f"{k}{cases[0][k]}" for k in KEYS if cases[0].get(k) is not None)


def _decode(model, cases, remasking, extra, threshold):
    first = cases[0]
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["gen_length"], block_length=first["block_length"],
                         remasking=remasking, threshold=threshold, extra=extra)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decoders.get(f"mdm:{remasking}")(model, canvas, cfg, [torch.Generator().manual_seed(0)] * len(cases))


def _extra(case, names) -> dict:
    return {ours: case[theirs] for theirs, ours in names.items() if case.get(theirs) is not None}


def _vicinity(model, cases):
    first = cases[0]
    extra = {"dinfer_cache": "vicinity", **_extra(first, LOOP), **_extra(first, CACHE)}
    return _decode(model, cases, f"dinfer_{first['decoder']}", extra, first["threshold"])


@pytest.mark.parametrize("cases", _groups(), ids=_label)
def test_tokens_and_nfe_equal_the_authors_vicinity_loop_batched(llada, cases):
    ours = _vicinity(llada, cases)  # one left-padded batch: each row decodes as alone
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe_official.tolist() == [c["nfe"] for c in cases]
    assert (ours.nfe <= ours.nfe_official).all()


def test_forwards_and_windows_are_the_authors_less_those_on_a_filled_block(llada, monkeypatch):
    """Per prompt alone: the forwards run (full or window [l, r)) are the authors' in order, less the ones their
    unrolled rounds run on a filled block, which are exactly the ones nfe_official adds."""
    calls = []
    forwards = dinfer_vicinity.VicinityForwards
    full, window = forwards._full, forwards._window
    monkeypatch.setattr(forwards, "_full", lambda self, x, *a: calls.append(["full", 0, x.shape[1]]) or
                        full(self, x, *a))
    monkeypatch.setattr(forwards, "_window", lambda self, x, rows, cols, left, width: calls.append(
        ["window", int(left[0]), int(left[0]) + width]) or window(self, x, rows, cols, left, width))
    for cases in _groups():
        for case in cases:
            calls.clear()
            ours = _vicinity(llada, [case])
            theirs = iter(case["calls"])
            assert all(call in theirs for call in calls)  # in order: a subsequence of theirs
            assert len(calls) == ours.nfe.item() and len(case["calls"]) - len(calls) == case["nfe"] - ours.nfe.item()


def test_the_refresh_and_window_change_the_tokens(llada):
    """The fixture's cases run refreshes and windows, and on some the tokens differ from the uncached decoder's."""
    assert sum(c["cache_updates"] for c in OFFICIAL["llada"]) > 0
    assert any(kind == "window" for c in OFFICIAL["llada"] for kind, *_ in c["calls"])
    differs = 0
    for cases in _groups():
        first = cases[0]
        plain = _decode(llada, cases, f"dinfer_{first['decoder']}", _extra(first, LOOP), first["threshold"])
        differs += plain.tokens.tolist() != [c["tokens"] for c in cases]
    assert differs > 0


def test_fails_with_a_full_forward_in_place_of_every_window(llada, monkeypatch):
    """Switch the distinctive step off (every window forward made a full forward of the canvas): the tokens leave
    the authors'."""
    forwards = dinfer_vicinity.VicinityForwards
    monkeypatch.setattr(forwards, "_window", lambda self, x, rows, cols, left, width:
                        self._full(x, rows, cols, torch.zeros_like(rows, dtype=torch.bool)))
    mismatched = sum(_vicinity(llada, cases).tokens.tolist() != [c["tokens"] for c in cases] for cases in _groups())
    assert mismatched > 0


def test_options_are_recorded_and_keyed(tmp_path):
    from dare.harness.plan import plan

    spec = decoders.get("mdm:dinfer_threshold")
    options = spec.Options().identity()
    vicinity = {"dinfer_cache", "dinfer_prefix_look", "dinfer_after_look", "dinfer_warmup_steps",
                "dinfer_cache_update_freq"}
    assert {k: options[k] for k in vicinity} == {
        "dinfer_cache": "none", "dinfer_prefix_look": 16, "dinfer_after_look": 16, "dinfer_warmup_steps": 4,
        "dinfer_cache_update_freq": None}
    assert decoders.get("dream:dinfer_threshold").Options().identity()["dinfer_cache"] == "none"
    assert "dinfer_prefix_look" not in decoders.get("dream:dinfer_credit").Options.model_fields
    base = ["remasking=dinfer_threshold", "gen_length=32", "steps=32", "block_length=16"]
    extras = ("", "dinfer_cache: vicinity", "dinfer_cache: vicinity, dinfer_prefix_look: 8",
              "dinfer_cache: vicinity, dinfer_after_look: 0", "dinfer_cache: vicinity, dinfer_warmup_steps: 0",
              "dinfer_cache: vicinity, dinfer_cache_update_freq: 2")
    plans = [plan("tiny-llada", "sudoku", overrides=[*base, f"extra={{{e}}}"], limit=2, out=tmp_path) for e in extras]
    assert len({p.generation_key() for p in plans}) == len(plans)


def test_runs_through_the_engine_with_its_defaults(tmp_path):
    """dare.plan / dare.evaluate on the shipped tiny-llada with the vicinity defaults: recorded, both NFE counts,
    Sudoku solved."""
    from dare.harness.plan import evaluate, plan

    run = plan("tiny-llada", "sudoku", overrides=["remasking=dinfer_threshold", "gen_length=64", "steps=64",
                                                  "block_length=32", "extra={dinfer_cache: vicinity}"],
               limit=2, out=tmp_path)
    evaluate(run)
    record = json.loads((run.run_dir / "run.json").read_text())
    assert record["decoder"]["options"]["dinfer_cache"] == "vicinity"
    assert record["decoder"]["options"]["dinfer_warmup_steps"] == 4
    assert record["metrics"]["sudoku"]["accuracy"]["value"] > 0
    rows = [json.loads(line) for line in (run.run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    assert all(0 < r["nfe"] <= r["nfe_official"] for r in rows)


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-dream", "--set", "remasking=dinfer_threshold", "--set", "extra={dinfer_cache: vicinity}"],
     "vicinity cache runs LLaDA only"),
    (["--model", "tiny-llada", "--set", "remasking=dinfer_threshold", "--set", "extra={dinfer_cache: vicinty}"],
     "dinfer_cache"),
    (["--model", "tiny-llada", "--set", "remasking=dinfer_credit", "--set", "extra={dinfer_prefix_lok: 4}"],
     "did you mean 'dinfer_prefix_look'")])
def test_bad_settings_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)
