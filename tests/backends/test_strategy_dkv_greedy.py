"""dKV-Cache-Greedy (mdm:dkv_greedy) against the authors' code, its options, its record and its refusals.

The fixture (tests/backends/fixtures/dkv_greedy_official.json; regenerate with
fixtures/scripts/make_dkv_fixture.py) was produced by horseee/dKV-Cache
``generation_utils/llada_dkv_cache_greedy.py::generate`` (commit 49a76fcc43b744ec2d960137f216e419317138b1)
running the authors' model class (models/modeling_llada_dkv_cache_greedy.py) with the weights of the noisy
tiny-llada of tests/backends/strategy_model.py (float32, CPU), on Sudoku prompts 0-2 one at a time after
``torch.manual_seed(sample)``, greedy tokens, ``remasking="random"``, at several refresh intervals
(``cache_reloading_step``) and windows (``window_size``); ``uncached_tokens`` are their loop's with
``enable_cache=False`` (the same order, a full pass every step). Here the three prompts decode as one
left-padded batch. NFE: one call per step in both loops (the fixture splits them into full and cached passes).

Where the cache is approximate: at gen 64 the greedy keys change tokens (refresh 16 on every prompt, refresh 8
on two); at gen 32 on these prompts they move none. The test below checks which.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders
from tests.cli_here import dare_eval

from .strategy_model import assert_dry_run_refused, noisy_tiny_llada
from .test_strategy_dkv_cache import count_passes

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "dkv_greedy_official.json").read_text())
KEYS = ("gen_length", "steps", "block_length", "cache_reloading_step", "window_size")
SETTINGS = list(dict.fromkeys(tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]))


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()  # the fixture's network (see strategy_model.py)


def _decode(model, cases, **extra):
    first = cases[0]
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["steps"], block_length=first["block_length"],
                         remasking="dkv_greedy", extra={"dkv_refresh": first["cache_reloading_step"],
                                                        "dkv_window": first["window_size"], **extra})
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decoders.get("mdm:dkv_greedy")(model, canvas, cfg, [torch.Generator().manual_seed(c["seed"])
                                                                   for c in cases])


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "gen{}-steps{}-block{}-refresh{}-window{}".format(*s))
def test_tokens_and_nfe_equal_the_authors_code_batched(llada, setting, monkeypatch):
    cases = [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]
    width = len(max((c["prompt_ids"] for c in cases), key=len)) + cases[0]["gen_length"]
    passes = count_passes(monkeypatch, llada.net, width)
    ours = _decode(llada, cases)
    monkeypatch.undo()
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases] and ours.nfe_official.tolist() == ours.nfe.tolist()
    assert passes == {"full": cases[0]["full_forwards"], "cached": cases[0]["cached_forwards"]}
    exact = _decode(llada, cases, dkv_refresh=1)  # the same order, every step a full pass
    assert exact.tokens.tolist() == [c["uncached_tokens"] for c in cases]


def test_the_greedy_keys_change_the_answer_where_the_authors_do(llada):
    moved = {tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"] if c["tokens"] != c["uncached_tokens"]}
    assert moved == {(64, 32, 32, 8, 2), (64, 64, 64, 16, 4)}
    cases = [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == (64, 64, 64, 16, 4)]
    assert all(c["tokens"] != c["uncached_tokens"] for c in cases)
    no_window = _decode(llada, cases, dkv_window=0).tokens.tolist()
    assert no_window != [c["tokens"] for c in cases]  # the recomputed neighbours matter too


def test_options_and_reads():
    decode = decoders.get("mdm:dkv_greedy")
    assert decode.Options().identity()["dkv_refresh"] == 2 and decode.Options().identity()["dkv_window"] == 4
    assert {"threshold", "factor", "cfg_scale", "cache"}.isdisjoint(decode.reads) and not decode.cacheable
    with pytest.raises(Exception, match="dkv_window"):
        decode.Options.model_validate({"dkv_window": -1})


def test_run_record_and_cache_key_carry_the_options(tmp_path):
    from dare.harness.plan import evaluate, plan

    base = ["remasking=dkv_greedy", "gen_length=32", "steps=32", "block_length=16"]
    runs = {name: plan("tiny-llada", "sudoku", overrides=[*base, *sets], limit=2, out=tmp_path)
            for name, sets in {"default": [], "window0": ["extra={dkv_window: 0}"]}.items()}
    assert runs["default"].generation_key() != runs["window0"].generation_key()
    evaluate(runs["window0"])  # the normal engine, batched, end to end
    record = json.loads((runs["window0"].run_dir / "run.json").read_text())
    assert record["decoder"]["name"] == "mdm:dkv_greedy"
    assert record["decoder"]["options"]["dkv_window"] == 0 and record["decoder"]["options"]["dkv_refresh"] == 2
    assert record["metrics"]["sudoku"]["accuracy"]["value"] > 0


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-dream", "--set", "remasking=dkv_greedy"], "not available for dream"),
    (["--model", "tiny-llada", "--set", "remasking=dkv_greedy", "--set", "extra={dkv_windw: 2}"],
     "did you mean 'dkv_window'"),
    (["--model", "tiny-llada", "--set", "remasking=dkv_greedy", "--set", "threshold=0.9"], "threshold=0.9 is not read"),
    (["--model", "tiny-llada", "--engine", "fastdllm", "--set", "remasking=dkv_greedy", "--set", "cache=dkv"],
     "cache")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)


def test_listed_by_dare_eval():
    done = dare_eval("--list")
    listed = next(line for line in done.stdout.splitlines() if line.startswith("decoders ("))
    assert done.returncode == 0 and {"mdm:dkv_greedy", "dream:klass"} <= set(listed.split(": ", 1)[1].split(", "))
