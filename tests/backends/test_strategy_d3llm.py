"""d3LLM entropy multi-block decoding (mdm:d3llm, dream:d3llm) against the authors' code, options, refusals.

Fixture tests/backends/fixtures/d3llm_official.json (regenerate with fixtures/scripts/make_d3llm_fixture.py):
hao-ai-lab/d3LLM (commit e5bfcaccb775ee75759c24ccc9a28218b8372b34) ``generate_multi_block``
(d3llm/d3llm_LLaDA/d3llm_llada_generate_util.py) on the noisy tiny-llada and Sudoku prompts 0-2, and
``DreamGenerationMixin._sample_multi_block`` (d3llm/d3llm_DREAM/d3llm_dream_generate_util.py) on the shipped
tiny-dream (random weights; its entropies lie near 5.35, hence the thresholds), greedy, batch 1 there. Here each
setting decodes its prompts as one left-padded batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding import d3llm
from dare.backends.decoding.common import Canvas
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .strategy_model import assert_dry_run_refused, noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "d3llm_official.json").read_text())
KEYS = ("family", "gen_length", "block_length", "threshold", "block_add_threshold", "decoded_token_threshold",
        "early_stop")
SETTINGS = sorted({tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]})


@pytest.fixture(scope="module")
def models():
    from dare.backends.engines.torch import TorchEngine
    from dare.harness import config
    from dare.harness.engine import EngineContext

    dream = TorchEngine(EngineContext(model_name="tiny-dream", model_spec=config.model("tiny-dream"), device="cpu"))
    return {"mdm": noisy_tiny_llada(), "dream": dream.model}


def _extra(setting, **more):
    return {"d3llm_entropy_threshold": setting[3], "d3llm_block_add_threshold": setting[4],
            "d3llm_decoded_token_threshold": setting[5], "d3llm_early_stop": setting[6], **more}


def _decode(model, name, cases, extra, **fields):
    first = cases[0]
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["gen_length"], block_length=first["block_length"],
                         remasking=name.split(":")[1], extra=extra, **fields)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decoders.get(name)(model, canvas, cfg, [torch.Generator().manual_seed(0) for _ in cases])


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"{s[0]}-g{s[1]}-b{s[2]}-tau{s[3]}-add{s[4]}-dec{s[5]}"
                                                            f"-stop{int(s[6])}")
def test_tokens_and_nfe_equal_the_authors_code_batched(models, setting):
    cases = [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]
    family = setting[0]
    ours = _decode(models[family], f"{family}:d3llm", cases, _extra(setting))
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases]
    assert ours.nfe_official.tolist() == [c["nfe_official"] for c in cases]
    assert all(c["nfe"] < c["gen_length"] for c in cases)  # parallel commits fired


def test_the_fixture_holds_both_nfe_conventions():
    # an early stop that leaves no mask ends an iteration without a forward: counted by the authors, not in nfe
    assert any(c["nfe_official"] == c["nfe"] + 1 for c in OFFICIAL["cases"])
    assert all(c["nfe_official"] in (c["nfe"], c["nfe"] + 1) for c in OFFICIAL["cases"])


@pytest.mark.parametrize("setting,plain", [(("mdm", 64, 16, 0.5, 0.5, 0.5, False), "mdm:low_confidence"),
                                           (("dream", 64, 16, 5.355, 0.5, 0.5, False), "dream:entropy")])
def test_tokens_differ_from_one_token_per_step_decoding(models, setting, plain):
    family = setting[0]
    case = next(c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting)
    assert _decode(models[family], plain, [case], {}).tokens.tolist() != [case["tokens"]]


def test_the_authors_candidate_quirk_is_reproduced_and_can_be_switched_off(models):
    setting = ("mdm", 64, 16, 0.5, 0.5, 0.5, True)
    cases = [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]
    fixed = _decode(models["mdm"], "mdm:d3llm", cases, _extra(setting, d3llm_official_quirk=False)).tokens.tolist()
    same = [row == c["tokens"] for row, c in zip(fixed, cases)]
    assert same == [True, True, False]  # sample 2: the fill's iteration committed over an EOS, not a mask


def test_sampled_rows_do_not_depend_on_their_neighbours(models):
    setting = next(s for s in SETTINGS if s[0] == "dream")
    cases = [c for c in OFFICIAL["cases"] if c["family"] == "dream"][:2] * 2
    extra = _extra(setting)

    def run(rows):
        picked = [cases[r] for r in rows]
        first = picked[0]
        cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["gen_length"],
                             block_length=first["block_length"], remasking="d3llm", extra=extra, temperature=0.8)
        canvas = Canvas.build([c["prompt_ids"] for c in picked], cfg.gen_length, models["dream"].mask_id,
                              models["dream"].pad_id, "cpu")
        with torch.inference_mode():
            gens = [torch.Generator().manual_seed(10 + r) for r in rows]
            return decoders.get("dream:d3llm")(models["dream"], canvas, cfg, gens).tokens.tolist()

    batch, alone, swapped = run([0, 1, 2]), run([1]), run([2, 1])
    assert batch[1] == alone[0] == swapped[1] and batch[2] == swapped[0]
    assert batch[0] != batch[2]  # same prompt, other seed: the tokens were sampled


def test_options_and_reads():
    for family in ("mdm", "dream"):
        decode = decoders.get(f"{family}:d3llm")
        identity = decode.Options().identity()
        assert identity["d3llm_entropy_threshold"] == 0.5 and identity["d3llm_block_add_threshold"] == 0.5
        assert identity["d3llm_decoded_token_threshold"] == 0.5 and identity["d3llm_early_stop"] is False
        assert identity["d3llm_official_quirk"] is True
        assert {"threshold", "factor", "cache", "cfg_scale"}.isdisjoint(decode.reads) and not decode.cacheable
    assert "block:d3llm" not in decoders
    assert d3llm.LLADA.lowest and not d3llm.DREAM.lowest and d3llm.DREAM.strict


def test_run_record_and_cache_key_carry_the_options(tmp_path):
    from dare.harness.plan import evaluate, plan

    base = ["remasking=d3llm", "gen_length=32", "steps=32", "block_length=16"]
    keyed = {tau: plan("tiny-llada", "sudoku", overrides=[*base, f"extra={{d3llm_entropy_threshold: {tau}}}"],
                       limit=2, out=tmp_path) for tau in (0.5, 0.8)}
    assert keyed[0.5].generation_key() != keyed[0.8].generation_key()
    run = keyed[0.8]
    evaluate(run)
    record = json.loads((run.run_dir / "run.json").read_text())
    assert record["decoder"]["name"] == "mdm:d3llm"
    assert record["decoder"]["options"]["d3llm_entropy_threshold"] == 0.8
    assert record["decoder"]["options"]["d3llm_block_add_threshold"] == 0.5
    rows = [json.loads(line) for line in (run.run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    assert len(rows) == 2 and all(0 < r["nfe"] <= 32 for r in rows)


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-sdar", "--set", "remasking=d3llm"], "not available for"),
    (["--model", "tiny-llada", "--set", "remasking=d3llm", "--set", "extra={d3llm_entropy_treshold: 1}"],
     "did you mean 'd3llm_entropy_threshold'"),
    (["--model", "tiny-dream", "--set", "remasking=d3llm", "--set", "extra={d3llm_block_add_threshold: 2}"],
     "d3llm_block_add_threshold"),
    (["--model", "tiny-llada", "--set", "remasking=d3llm", "--set", "threshold=0.9"], "not read by decoder mdm:d3llm"),
    (["--model", "tiny-llada", "--engine", "fastdllm", "--set", "remasking=d3llm", "--set", "cache=dual"],
     "runs its own forward")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)
