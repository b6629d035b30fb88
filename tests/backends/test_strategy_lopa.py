"""LoPA (dream:lopa) against the authors' code, its look-ahead, the cap, options and refusals.

Fixture tests/backends/fixtures/lopa_official.json (regenerate with fixtures/scripts/make_lopa_fixture.py):
zhijie-group/LoPA (commit 433177a608dee8901bae0e7c02f9b6f341a6f6d0) ``DreamLoRA._generate_enhanced_speculative``
(scale_dream_d2f/scale_dream_d2f.py) with its own Dream class and shared prefix KV cache, on the shipped
tiny-dream (random weights, float32), greedy, batch 1 there; here each setting decodes its prompts as one batch.
Three of its twelve runs never finish (they commit the mask token itself; the authors' round limit is commented
out). Mutations watched failing the parity test: look-ahead off, the prefix cache off (every forward over the
whole branch), k - 1 look-ahead branches, ceil in place of floor for the share of masks averaged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .strategy_model import assert_dry_run_refused

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "lopa_official.json").read_text())
KEYS = ("gen_length", "block_length", "branching_factor", "skip_threshold", "block_add_threshold", "branch_topp",
        "selection_conf_alpha", "sampling_strategy")
CONFIDENCE = {"neg_entropy": "neg_entropy", "margin": "margin", "default": "probability"}  # the authors' names
SETTINGS = sorted({tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]})
FINISHED = [c for c in OFFICIAL["cases"] if c["finished"]]


@pytest.fixture(scope="module")
def dream():
    from dare.backends.engines.torch import TorchEngine
    from dare.harness import config
    from dare.harness.engine import EngineContext

    return TorchEngine(EngineContext(model_name="tiny-dream", model_spec=config.model("tiny-dream"),
                                     device="cpu")).model


def _decode(model, cases, name="dream:lopa", temperature=0.0, seeds=None, **extra):
    first = cases[0]
    extra = {"lopa_branching_factor": first["branching_factor"], "lopa_skip_threshold": first["skip_threshold"],
             "lopa_block_add_threshold": first["block_add_threshold"], "lopa_branch_topp": first["branch_topp"],
             "lopa_selection_conf_alpha": first["selection_conf_alpha"],
             "lopa_confidence": CONFIDENCE[first["sampling_strategy"]], **extra} if name == "dream:lopa" else {}
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["gen_length"], block_length=first["block_length"],
                         remasking=name.split(":")[1], extra=extra, temperature=temperature)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    gens = [torch.Generator().manual_seed(s) for s in (seeds or [0] * len(cases))]
    with torch.inference_mode():
        return decoders.get(name)(model, canvas, cfg, gens)


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(map(str, s)))
def test_tokens_and_rounds_equal_the_authors_code_batched(dream, setting):
    cases = [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]
    ours = _decode(dream, cases)
    for r, case in enumerate(cases):
        if not case["finished"]:
            continue
        assert ours.tokens[r].tolist() == case["tokens"]
        assert ours.nfe_official[r].item() == case["rounds"]
        assert ours.nfe[r].item() == case["forwards"]  # their run ended with the winner: the same forwards
        assert case["rounds"] < case["forwards"] < (case["branching_factor"] + 1) * case["rounds"]


def test_the_fixture_covers_the_settings_that_change_the_choice():
    assert {c["branching_factor"] for c in FINISHED} == {2, 3} and len(FINISHED) == 9
    assert {c["block_length"] for c in FINISHED} == {8, 16} and {c["block_add_threshold"] for c in FINISHED} == {0.1, 1}
    assert {c["gen_length"] for c in FINISHED} == {16, 32} and {c["branch_topp"] for c in FINISHED} == {0.5, 1}
    assert {c["selection_conf_alpha"] for c in FINISHED} == {0, 0.5}
    assert {c["sampling_strategy"] for c in FINISHED} == {"neg_entropy", "margin"}


def test_a_run_that_never_finishes_stops_at_the_cap_with_masks_left(dream):
    cases = [c for c in OFFICIAL["cases"] if not c["finished"]]
    for case in cases:
        ours = _decode(dream, [case])
        g = case["gen_length"]
        assert ours.nfe_official.item() == g + 1 and ours.nfe.item() < case["forwards"]
        stuck = ours.tokens == dream.mask_id
        assert stuck.any() and (ours.commit_step[stuck] >= 0).any()  # the mask token itself was committed


def test_tokens_differ_from_plain_decoding(dream):
    for case in FINISHED:
        for plain in ("dream:low_confidence", "dream:entropy"):
            assert _decode(dream, [case], plain).tokens[0].tolist() != case["tokens"]


def test_without_look_ahead_the_tokens_and_rounds_change(dream):
    # branching below 2 is D2F decoding with the same cache: one branch, one forward a round
    for case in FINISHED:
        off = _decode(dream, [case], lopa_branching_factor=0)
        assert _decode(dream, [case], lopa_branching_factor=1).tokens.tolist() == off.tokens.tolist()
        assert off.nfe.item() == off.nfe_official.item() - 1
        # alpha 0.5: the base (creation confidence 1) beats every look-ahead (negative entropy <= 0) here
        assert (off.tokens[0].tolist() != case["tokens"]) == (case["selection_conf_alpha"] == 0)
        assert off.nfe_official.item() > case["rounds"] or case["selection_conf_alpha"] > 0


def test_the_quirk_off_spawns_one_branch_fewer(dream):
    # k - 1 look-ahead branches and no duplicate winner: k = 3 picks the same winners as the authors' k = 2
    for case in (c for c in FINISHED if c["branching_factor"] == 2):
        ours = _decode(dream, [case], lopa_branching_factor=3, lopa_official_quirk=False)
        assert ours.tokens[0].tolist() == case["tokens"] and ours.nfe_official.item() == case["rounds"]
        duplicates = case["forwards"] - ours.nfe.item()  # the rounds that kept the winner twice
        assert duplicates > 0 if case["block_add_threshold"] == 1 else duplicates == 0


def test_sampled_rows_do_not_depend_on_their_neighbours(dream):
    cases = [FINISHED[0], FINISHED[0], FINISHED[2]]
    batch = _decode(dream, cases, temperature=0.8, seeds=[1, 2, 3]).tokens.tolist()
    alone = _decode(dream, cases[1:2], temperature=0.8, seeds=[2]).tokens.tolist()
    assert batch[1] == alone[0] and batch[0] != batch[1]


def test_options_and_reads():
    decode = decoders.get("dream:lopa")
    identity = decode.Options().identity()
    assert identity["lopa_branching_factor"] == 2 and identity["lopa_branch_topp"] == 1.0
    assert identity["lopa_selection_conf_alpha"] == 0.0 and identity["lopa_skip_threshold"] == 0.9
    assert identity["lopa_block_add_threshold"] == 0.1 and identity["lopa_decoded_token_threshold"] == 0.95
    assert identity["lopa_confidence"] == "neg_entropy" and identity["lopa_official_quirk"] is True
    assert {"threshold", "factor", "cache", "cfg_scale"}.isdisjoint(decode.reads) and not decode.cacheable
    assert "mdm:lopa" not in decoders and decode.batch_independent


def test_run_record_and_cache_key_carry_the_options(tmp_path):
    from dare.harness.plan import evaluate, plan

    base = ["remasking=lopa", "gen_length=32", "steps=32", "block_length=8"]
    keyed = {k: plan("tiny-dream", "sudoku", overrides=[*base, f"extra={{lopa_branching_factor: {k}}}"], limit=1,
                     out=tmp_path) for k in (2, 3)}
    assert keyed[2].generation_key() != keyed[3].generation_key()
    run = keyed[3]
    evaluate(run)
    record = json.loads((run.run_dir / "run.json").read_text())
    assert record["decoder"]["name"] == "dream:lopa"
    assert record["decoder"]["options"]["lopa_branching_factor"] == 3
    assert record["decoder"]["options"]["lopa_skip_threshold"] == 0.9


def test_the_trained_tiny_dream_solves_sudoku_at_the_defaults(tmp_path):
    from dare.harness.plan import evaluate, plan

    run = plan("tiny-dream-sudoku", "sudoku", overrides=["remasking=lopa", "gen_length=32", "steps=32",
                                                         "block_length=8"], limit=4, out=tmp_path)
    evaluate(run)
    record = json.loads((run.run_dir / "run.json").read_text())
    assert record["metrics"]["sudoku"]["accuracy"]["value"] > 0
    rows = [json.loads(line) for line in (run.run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    assert len(rows) == 4 and all(r["nfe"] > r["nfe_official"] for r in rows)  # look-ahead forwards ran


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-llada", "--set", "remasking=lopa"], "not available for"),
    (["--model", "tiny-dream", "--set", "remasking=lopa", "--set", "extra={lopa_branching_factr: 3}"],
     "did you mean 'lopa_branching_factor'"),
    (["--model", "tiny-dream", "--set", "remasking=lopa", "--set", "extra={lopa_branch_topp: 0}"], "lopa_branch_topp"),
    (["--model", "tiny-dream", "--set", "remasking=lopa", "--set", "threshold=0.9"], "not read by decoder dream:lopa")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)
