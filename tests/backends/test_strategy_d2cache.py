"""d2Cache (mdm:d2cache, dream:d2cache) against the authors' code, its options, its record and its refusals.

Fixture tests/backends/fixtures/d2cache_official.json (regenerate with fixtures/scripts/make_d2cache_fixture.py):
Kamichanw/d2Cache ``src/generation/vanilla.py::vanilla_generate`` with ``src/cache/d2cache.py::d2Cache``
(commit 72feb60bb288a5a4d14b4bab9afbbaa1fc1b509a) running the authors' hooked model classes (eager attention)
with our weights: the noisy tiny-llada of tests/backends/strategy_model.py on Sudoku prompts 0-2 and the shipped
tiny-dream (random weights) on prompts 0-1, batch 1, greedy maskgit_plus, one token per step. Besides the tokens
and the forwards it records, per step, the columns the cache fed through the layers and the committed column,
so the test holds every step's query set (stages 1-4, the Dream shift) and commit order (confidence x density)
to theirs. Here the prompts of a setting decode as one left-padded batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding import d2cache
from dare.backends.decoding.common import Canvas
from dare.backends.decoding.d2cache_queries import certainty_density
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .strategy_model import assert_dry_run_refused, noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "d2cache_official.json").read_text())
KEYS = ("model", "gen_length", "block_length", "rollout_p", "current_k", "cache_sigma", "inflate_w", "prior_sigma")
SETTINGS = list(dict.fromkeys(tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]))


@pytest.fixture(scope="module")
def models():
    from dare.backends.engines.torch import TorchEngine
    from dare.harness import config
    from dare.harness.engine import EngineContext

    context = EngineContext(model_name="tiny-dream", model_spec=config.model("tiny-dream"), device="cpu")
    return {"llada": noisy_tiny_llada(), "dream": TorchEngine(context).model}  # the fixture's networks


def _extra(case, **changes):
    extra = {"d2cache_rollout_p": case["rollout_p"], "d2cache_current_k": case["current_k"],
             "d2cache_sigma": case["cache_sigma"], "d2cache_inflate_w": case["inflate_w"],
             "d2cache_prior_sigma": case["prior_sigma"]}
    return {**extra, **changes}


def _decode(models, cases, remasking="d2cache", extra=None):
    first = cases[0]
    model = models[first["model"]]
    family = "mdm" if first["model"] == "llada" else "dream"
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["gen_length"], block_length=first["block_length"],
                         remasking=remasking, extra=_extra(first) if extra is None else extra)
    prompts = [OFFICIAL[f"{first['model']}_prompt_ids"][c["sample"]] for c in cases]
    canvas = Canvas.build(prompts, cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decoders.get(f"{family}:{remasking}")(model, canvas, cfg, [torch.Generator().manual_seed(0)
                                                                          for _ in cases])


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(map(str, s)))
def test_tokens_queries_commits_and_nfe_equal_the_authors_code(models, setting, monkeypatch):
    cases = [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]
    queries: dict[int, tuple] = {}
    select = d2cache.D2Cache._next_queries

    def logged(state, x):
        chosen = select(state, x)  # columns of the row's own canvas (its padding dropped), as in a batch-1 run
        # the state is held beside its steps: a row's state freed before the next row's is made could lend its
        # id to it, and their steps would merge
        queries.setdefault(id(state), (state, []))[1].append(chosen[0].tolist())
        return chosen

    monkeypatch.setattr(d2cache.D2Cache, "_next_queries", logged)
    ours = _decode(models, cases)
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases] == [c["gen_length"] for c in cases]
    assert [steps for _, steps in queries.values()] == [c["queries"][1:] for c in cases]
    assert all(c["queries"][0] is None for c in cases)
    for row, case in enumerate(cases):
        steps = ours.commit_step[row]
        assert [(steps == s).nonzero()[:, 0].tolist() for s in range(case["nfe"])] == case["commits"]
        assert case["conf_cache_is_first_step"]  # quirk 1 held in their run
    width = len(OFFICIAL[f"{setting[0]}_prompt_ids"][cases[0]["sample"]]) + cases[0]["gen_length"]
    assert max(len(q) for c in cases for q in c["queries"][1:]) < width  # later steps are partial forwards
    plain = _decode(models, cases, "low_confidence" if setting[0] == "llada" else "maskgit_plus", extra={})
    assert all(p != c["tokens"] for p, c in zip(plain.tokens.tolist(), cases))


def test_certainty_density_equals_the_authors(models):
    for case in OFFICIAL["density"]:
        ours = certainty_density(torch.tensor(case["decoded"]), case["sigma"])
        torch.testing.assert_close(ours, torch.tensor(case["density"], dtype=torch.float64), atol=1e-6, rtol=0)


def test_partial_forwards_and_quirks_change_the_tokens(models):
    """Recomputing (nearly) every column each step, or switching the quirks off, moves tokens of the fixture."""
    cases = [c for c in OFFICIAL["cases"] if c["model"] == "llada" and c["current_k"] == 8 and c["prior_sigma"]]
    everything = _decode(models, cases, extra=_extra(cases[0], d2cache_rollout_p=1.0))  # ~every column a query
    assert everything.tokens.tolist() != [c["tokens"] for c in cases]
    fixed = _decode(models, cases, extra=_extra(cases[0], d2cache_official_quirks=False))
    assert fixed.tokens.tolist() != [c["tokens"] for c in cases]


def test_quirk_2_keeps_unrecomputed_masked_columns_as_candidates(models):
    """Their candidate filter acts on a copy: masked columns without fresh logits (zero logits: probability 1/V,
    proposal 0) stay commit candidates under the quirk and are dropped without it."""
    model = models["llada"]
    cfg = DecodingConfig(gen_length=4, steps=4, block_length=4, remasking="d2cache")
    canvas = Canvas.build([[7, 8, 9]], 4, model.mask_id, model.pad_id, "cpu")
    for quirks, expected in ((True, [[True, False, False, False]]), (False, [[False, True, False, False]])):
        opts = d2cache.D2CacheOptions(d2cache_official_quirks=quirks, d2cache_prior_sigma=None)
        state = d2cache.D2Cache(model, canvas, cfg, opts, [torch.Generator()])
        state.p = torch.tensor([[0.9, 0.2, 0.8, 0.1]], dtype=torch.float64)  # column 0 was not recomputed
        state.x0, state.fresh = torch.zeros(1, 4, dtype=torch.long), torch.tensor([[False, True, True, True]])
        masked = torch.tensor([[True, True, False, True]])
        commit, _ = state.policy(None, masked, torch.tensor([1]), 0, 4, [], cfg, opts, model)
        assert commit.tolist() == expected


def test_options_record_and_cache_key(tmp_path):
    from dare.harness.plan import evaluate, plan

    assert d2cache.D2CacheOptions().identity() == {
        "record_trajectory": False, "d2cache_rollout_p": 0.1, "d2cache_current_k": 32, "d2cache_sigma": 10.0,
        "d2cache_inflate_w": 0, "d2cache_prior_sigma": 10.0, "d2cache_official_quirks": True}
    assert {"threshold", "factor", "cfg_scale", "cache"}.isdisjoint(decoders.get("mdm:d2cache").reads)
    base = ["remasking=d2cache", "gen_length=16", "steps=16", "block_length=16"]
    runs = {k: plan("tiny-llada", "sudoku", overrides=[*base, f"extra={{d2cache_current_k: {k}}}"], limit=2,
                    out=tmp_path) for k in (8, 16)}
    assert runs[8].generation_key() != runs[16].generation_key()
    evaluate(runs[8])
    record = json.loads((runs[8].run_dir / "run.json").read_text())
    assert record["decoder"]["name"] == "mdm:d2cache"
    assert record["decoder"]["options"]["d2cache_current_k"] == 8
    assert record["decoder"]["options"]["d2cache_official_quirks"] is True


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-sdar", "--set", "remasking=d2cache"], "not available for sdar"),
    (["--model", "tiny-llada", "--set", "remasking=d2cache", "--set", "extra={d2cache_curent_k: 8}"],
     "did you mean 'd2cache_current_k'"),
    (["--model", "tiny-dream", "--set", "remasking=d2cache", "--set", "extra={d2cache_rollout_p: 2}"],
     "d2cache_rollout_p"),
    (["--model", "tiny-llada", "--set", "remasking=d2cache", "--set", "threshold=0.9"],
     "not read by decoder mdm:d2cache"),
    (["--model", "tiny-llada", "--engine", "fastdllm", "--set", "remasking=d2cache", "--set", "cache=dual"],
     "runs its own forward")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)


def test_a_padded_row_decodes_as_alone(models):
    """Rows decode one at a time without their left padding: a row beside a longer one (so left-padded) decodes
    as it does alone."""
    case = next(c for c in OFFICIAL["cases"] if c["model"] == "llada" and c["sample"] == 1)
    model = models["llada"]
    cfg = DecodingConfig(gen_length=case["gen_length"], steps=case["gen_length"], block_length=case["block_length"],
                         remasking="d2cache", extra=_extra(case))
    prompts = [OFFICIAL["llada_prompt_ids"][0] * 2, OFFICIAL["llada_prompt_ids"][1]]
    canvas = Canvas.build(prompts, cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        ours = decoders.get("mdm:d2cache")(model, canvas, cfg, [torch.Generator().manual_seed(0) for _ in prompts])
    assert ours.tokens[1].tolist() == case["tokens"] and ours.nfe.tolist() == [cfg.gen_length] * 2
