"""KLASS on Dream (dream:klass) against the authors' code, its options, its record and its refusals.

Fixture tests/backends/fixtures/dream_klass_official.json (regenerate with
fixtures/scripts/make_dream_klass_fixture.py): shkim0116/KLASS ``src/model/dream_klass.py``
``DreamGenerationMixin._sample`` (commit ad87ecbe9fdef4a6e93701afbc150cb9213fbcd7, ``alg="klass"``) run with the
shipped tiny-dream network (random weights, 288-token vocabulary, float32, CPU) as its model, Sudoku prompts
0-1 one at a time after ``torch.manual_seed(seed)``: greedy and sampled fallbacks (temperature 1.0 and 0.2 with
top_p / top_k), every unmask strategy, and runs that end early, use every step, or keep masks. The random
model's confidences lie near 0.02-0.05, hence the low confidence thresholds. Here both prompts decode as one
batch, each row with its own generator seeded as the reference's run.
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

from .strategy_model import assert_dry_run_refused

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "dream_klass_official.json").read_text())
KEYS = ("steps", "conf_threshold", "kl_threshold", "kl_history_length", "unmask_strategy", "temperature", "top_p",
        "top_k")
SETTINGS = list(dict.fromkeys(tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]))


@pytest.fixture(scope="module")
def dream():
    from dare.backends.engines.torch import TorchEngine
    from dare.harness import config
    from dare.harness.engine import EngineContext

    context = EngineContext(model_name="tiny-dream", model_spec=config.model("tiny-dream"), device="cpu")
    return TorchEngine(context).model


def _extra(setting):
    return {"klass_conf_threshold": setting[1], "klass_kl_threshold": setting[2], "klass_history": setting[3],
            "klass_unmask_strategy": setting[4]}


def _decode(model, cases, remasking="klass", extra=None, **fields):
    first = cases[0]
    fields = {"steps": first["steps"], "temperature": first["temperature"], "top_p": first["top_p"],
              "top_k": first["top_k"], **fields}
    cfg = DecodingConfig(gen_length=first["gen_length"], block_length=first["gen_length"], remasking=remasking,
                         extra=extra or {}, **fields)
    canvas = Canvas.build([OFFICIAL["prompt_ids"][c["sample"]] for c in cases], cfg.gen_length, model.mask_id,
                          model.pad_id, "cpu")
    gens = [torch.Generator().manual_seed(c["seed"]) for c in cases]
    with torch.inference_mode():
        return decoders.get(f"dream:{remasking}")(model, canvas, cfg, gens)


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(str(v) for v in s if v is not None))
def test_tokens_and_nfe_equal_the_authors_code_batched(dream, setting):
    cases = [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]
    ours = _decode(dream, cases, extra=_extra(setting))
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["forwards"] for c in cases]
    assert ours.nfe_official.tolist() == [c["used_steps"] for c in cases]  # 256 where every step ran


def test_stable_commits_fire_and_change_the_answer(dream):
    """Where ready positions exist the decode ends early and its tokens differ from the fallback alone
    (klass_kl_threshold 0: nothing is ever stable) and from Dream's maskgit_plus at the same steps."""
    early = [c for c in OFFICIAL["cases"] if c["used_steps"] < c["steps"]]
    assert {c["temperature"] for c in early} == {0.0, 1.0} and all(c["forwards"] < c["steps"] for c in early)
    cases = [c for c in early if c["temperature"] == 0 and c["kl_history_length"] == 2 and c["steps"] == 32]
    setting = tuple(cases[0][k] for k in KEYS)
    fallback_only = _decode(dream, cases, extra={**_extra(setting), "klass_kl_threshold": 0.0})
    assert fallback_only.nfe.tolist() == [32, 32] and fallback_only.nfe_official.tolist() == [256, 256]
    assert fallback_only.tokens.tolist() != [c["tokens"] for c in cases]
    assert _decode(dream, cases, "maskgit_plus").tokens.tolist() != [c["tokens"] for c in cases]


def test_sampled_fallback_reads_its_generator(dream):
    """At temperature > 0 the fallback's position comes from the row's draws: another seed, another answer."""
    cases = [c for c in OFFICIAL["cases"] if c["temperature"] == 1.0]
    setting = tuple(cases[0][k] for k in KEYS)
    reseeded = [{**c, "seed": c["seed"] + 100} for c in cases]
    seeded = _decode(dream, cases, extra=_extra(setting)).tokens
    assert not torch.equal(_decode(dream, reseeded, extra=_extra(setting)).tokens, seeded)


def test_rows_are_independent_of_their_neighbours(dream):
    """One row finishes early through ready commits, the other decodes by the fallback alone: each equals
    its own decode (the reference's batch would stall the ready row while the other falls back)."""
    case = next(c for c in OFFICIAL["cases"] if c["used_steps"] == 6 and c["sample"] == 0)
    setting = tuple(case[k] for k in KEYS)
    alone = _decode(dream, [case], extra=_extra(setting))
    pair = _decode(dream, [case, {**case, "sample": 1}], extra=_extra(setting))
    assert pair.tokens[0].tolist() == alone.tokens[0].tolist() == case["tokens"]


def test_blocks_and_padding_keep_rows_independent(dream):
    """Blocks of 8 on a padded batch with sampled fallbacks: each row decodes as it does alone, block by block."""
    prompts = [OFFICIAL["prompt_ids"][0], OFFICIAL["prompt_ids"][1][100:]]
    cfg = DecodingConfig(gen_length=32, block_length=8, steps=32, remasking="klass", temperature=1.0,
                         extra={"klass_conf_threshold": 0.03})

    def run(rows):
        canvas = Canvas.build([prompts[r] for r in rows], 32, dream.mask_id, dream.pad_id, "cpu")
        with torch.inference_mode():
            return decoders.get("dream:klass")(model=dream, canvas=canvas, cfg=cfg,
                                               gens=[torch.Generator().manual_seed(r) for r in rows])

    together = run([0, 1])
    assert torch.equal(together.tokens, torch.cat([run([0]).tokens, run([1]).tokens]))
    assert (together.tokens != dream.mask_id).all() and (together.nfe < 32).all()
    first_commit = together.commit_step.view(2, 4, 8).amin(-1)
    assert (first_commit.diff(dim=-1) > 0).all()  # block b + 1 starts after block b is full


def test_options_and_refusals(dream):
    decode = decoders.get("dream:klass")
    identity = decode.Options().identity()
    assert identity["klass_unmask_strategy"] == "all" and identity["klass_history"] == 2
    assert {"threshold", "factor", "alg_temp", "cfg_scale"}.isdisjoint(decode.reads)
    assert {"temperature", "top_p", "top_k", "block_length"} <= decode.reads
    with pytest.raises(ConfigError, match="klass_history"):
        _decode(dream, OFFICIAL["cases"][:1], extra={"klass_history": 0})
    with pytest.raises(Exception, match="klass_unmask_strategy"):
        decode.Options.model_validate({"klass_unmask_strategy": "max_kl"})


def test_run_record_and_cache_key_carry_the_options(tmp_path):
    from dare.harness.plan import evaluate, plan

    base = ["remasking=klass", "gen_length=16", "steps=16", "block_length=16"]
    runs = {name: plan("tiny-dream", "sudoku", overrides=[*base, *sets], limit=2, out=tmp_path)
            for name, sets in {"default": [], "min_kl": ["extra={klass_unmask_strategy: min_kl}"]}.items()}
    assert runs["default"].generation_key() != runs["min_kl"].generation_key()
    evaluate(runs["min_kl"])  # the normal engine, batched, end to end
    record = json.loads((runs["min_kl"].run_dir / "run.json").read_text())
    assert record["decoder"]["name"] == "dream:klass"
    assert record["decoder"]["options"]["klass_unmask_strategy"] == "min_kl"
    rows = [json.loads(line) for line in (runs["min_kl"].run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["nfe"] <= 16 and r["nfe_official"] in (r["nfe"], 256) for r in rows)


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-sdar", "--set", "remasking=klass"], "not available for sdar"),
    (["--model", "tiny-dream", "--set", "remasking=klass", "--set", "extra={klass_unmask_stratgy: all}"],
     "did you mean 'klass_unmask_strategy'"),
    (["--model", "tiny-dream", "--set", "remasking=klass", "--set", "extra={klass_unmask_strategy: max_kl}"],
     "klass_unmask_strategy"),
    (["--model", "tiny-dream", "--set", "remasking=klass", "--set", "alg_temp=0.5"], "alg_temp=0.5 is not read"),
    (["--model", "tiny-dream", "--engine", "fastdllm", "--set", "remasking=klass", "--set", "cache=dual"], "cache")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)
