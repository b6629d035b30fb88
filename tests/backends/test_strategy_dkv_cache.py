"""dKV-Cache (``cache=dkv``) against the authors' code, under several commit rules, its options and its record.

The fixture (tests/backends/fixtures/dkv_official.json; regenerate with fixtures/scripts/make_dkv_fixture.py)
was produced by horseee/dKV-Cache ``generation_utils/llada_dkv_cache_decode.py::generate`` (commit
49a76fcc43b744ec2d960137f216e419317138b1) running the authors' model class
(models/modeling_llada_dkv_cache_decode.py) with the weights of the noisy tiny-llada of
tests/backends/strategy_model.py (float32, CPU), on Sudoku prompts 0-2 one at a time, greedy low confidence,
``enable_cache=True`` at four refresh intervals (``cache_reloading_step`` 1, 2, 4, 8). Here the three prompts
decode as one left-padded batch. NFE: one call per step in both loops (the fixture also splits them into
full and cached passes).

Where the cache is approximate: at refresh 2 and 8 the fixture's tokens differ from the uncached
low-confidence decode, so the parity test fails if the cache is switched off. At refresh 1 every step is a
full pass and the authors' cache is exact (tokens equal the uncached decode); at refresh 4 on these prompts
its approximation moves no token. Both facts are tested.

Dream (tests/backends/fixtures/dkv_dream_official.json, same script): the authors' ``diffusion_generate``
(generation_utils/dream_generation_utils.py, ``cache_type="decoded"``, ``shift_type="un"``) with their model
file models/modeling_dream.py carrying the shipped tiny-dream's weights, on Sudoku prompts 0-1, greedy
maskgit_plus and entropy at several ``cache_steps``; the approximate cases' tokens differ from the uncached
Dream decode, ``cache_steps=1`` (a full pass every step) equals it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.backends.decoding.fastdllm import cache_strategy, cached_decoder
from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig
from dare.harness.registry import caches, decoders
from tests.cli_here import dare_eval

from .strategy_model import noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "dkv_official.json").read_text())
DREAM = json.loads((Path(__file__).parent / "fixtures" / "dkv_dream_official.json").read_text())
DREAM_SETTINGS = sorted({(c["alg"], c["steps"], c["cache_steps"], c["cache_type"]) for c in DREAM["cases"]})
REFRESH = sorted({c["cache_reloading_step"] for c in OFFICIAL["cases"]})
APPROXIMATE, EXACT = (2, 8), (1, 4)  # refresh intervals whose tokens differ from / equal the uncached decode


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()  # the fixture's network (see strategy_model.py)


@pytest.fixture(scope="module")
def dream():
    from dare.backends.engines.torch import TorchEngine
    from dare.harness import config
    from dare.harness.engine import EngineContext

    context = EngineContext(model_name="tiny-dream", model_spec=config.model("tiny-dream"), device="cpu")
    return TorchEngine(context).model


def count_passes(monkeypatch, net, width: int) -> dict[str, int]:
    """Count ``net``'s calls (until ``monkeypatch.undo()``) as full (canvas ``width`` wide) or cached passes."""
    passes = {"full": 0, "cached": 0}
    forward = net.forward

    def counted(ids, *args, **kwargs):
        passes["cached" if ids.shape[1] < width else "full"] += 1
        return forward(ids, *args, **kwargs)

    monkeypatch.setattr(net, "forward", counted)
    return passes


def _cases(refresh):
    return [c for c in OFFICIAL["cases"] if c["cache_reloading_step"] == refresh]


def _decode(model, cases, rule="low_confidence", cache="dkv", family="mdm", **fields):
    first = cases[0]
    extra = fields.pop("extra", {})
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["steps"],
                         block_length=first.get("block_length", first["gen_length"]), remasking=rule, cache=cache,
                         extra=extra, **fields)
    decode = cached_decoder(decoders.get(f"{family}:{rule}"), cache)
    prompts = [c["prompt_ids"] if "prompt_ids" in c else DREAM["prompt_ids"][c["sample"]] for c in cases]
    canvas = Canvas.build(prompts, cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decode(model, canvas, cfg, [torch.Generator().manual_seed(0) for _ in cases])


@pytest.mark.parametrize("refresh", REFRESH)
def test_tokens_and_nfe_equal_the_authors_code_batched(llada, refresh, monkeypatch):
    cases = _cases(refresh)
    width = len(max((c["prompt_ids"] for c in cases), key=len)) + cases[0]["gen_length"]
    passes = count_passes(monkeypatch, llada.net, width)
    ours = _decode(llada, cases, extra={"dkv_refresh": refresh})
    monkeypatch.undo()
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases] and ours.nfe_official.tolist() == ours.nfe.tolist()
    # one batched pass per step: the same split into full and cached passes as each of the authors' rows
    assert passes == {"full": cases[0]["full_forwards"], "cached": cases[0]["cached_forwards"]}
    uncached = _decode(llada, cases, cache="none")
    if refresh in APPROXIMATE:
        assert uncached.tokens.tolist() != [c["tokens"] for c in cases]  # the delayed keys change the answer
    else:
        assert uncached.tokens.tolist() == [c["tokens"] for c in cases]


@pytest.mark.parametrize("setting", DREAM_SETTINGS, ids=lambda s: f"{s[0]}-steps{s[1]}-{s[3]}{s[2] or ''}")
def test_dream_tokens_and_nfe_equal_the_authors_code_batched(dream, setting, monkeypatch):
    alg, steps, refresh, kind = setting
    cases = [c for c in DREAM["cases"] if (c["alg"], c["steps"], c["cache_steps"], c["cache_type"]) == setting]
    extra = {"dkv_refresh": refresh} if kind == "decoded" else {"dkv_variant": "prefill"}
    width = len(max(DREAM["prompt_ids"], key=len)) + cases[0]["gen_length"]
    passes = count_passes(monkeypatch, dream.net, width)
    ours = _decode(dream, cases, alg, family="dream", extra=extra)
    monkeypatch.undo()
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases] and ours.nfe_official.tolist() == ours.nfe.tolist()
    assert passes == {"full": cases[0]["full_forwards"], "cached": cases[0]["cached_forwards"]}
    uncached = _decode(dream, cases, alg, cache="none", family="dream").tokens.tolist()
    assert (uncached == [c["tokens"] for c in cases]) == (refresh == 1)  # exact only with a full pass every step


def test_prefill_variant_is_the_fastdllm_prefix_cache(llada, dream):
    """Caching only what a block starts with, from its first pass, is Fast-dLLM's prefix cache (LLaDA; on
    Dream both start one column early)."""
    for model, family, rule, cases in ((llada, "mdm", "low_confidence", _cases(8)),
                                       (dream, "dream", "entropy", DREAM["cases"][:2])):
        prefill = _decode(model, cases, rule, family=family, extra={"dkv_variant": "prefill"})
        prefix = _decode(model, cases, rule, cache="prefix", family=family)
        assert torch.equal(prefill.tokens, prefix.tokens)


def test_each_rule_runs_under_the_cache_and_rows_stay_independent(llada):
    cases = _cases(8)
    for rule, fields in (("low_confidence", {"threshold": 0.05}), ("random", {}), ("pc_sampler", {})):
        exact = _decode(llada, cases, rule, extra={"dkv_refresh": 1}, **fields)  # every step a full pass
        assert torch.equal(exact.tokens, _decode(llada, cases, rule, cache="none", **fields).tokens)
        together = _decode(llada, cases, rule, extra={"dkv_refresh": 8}, **fields)
        alone = [_decode(llada, [c], rule, extra={"dkv_refresh": 8}, **fields).tokens[0] for c in cases]
        assert torch.equal(together.tokens, torch.stack(alone))  # threshold rows commit unequal counts: padded
    parallel = _decode(llada, cases, extra={"dkv_refresh": 8}, threshold=0.05)
    assert (parallel.nfe < cases[0]["steps"]).any()  # the threshold rule did commit several tokens per step


def test_padding_queries_leave_a_row_as_it_decodes_alone(llada):
    """Rows that committed unequal counts: the shorter row's query list is padded with its cached block
    columns, whose keys must stay the delayed ones (writing them moves the masked logits by ~0.03)."""
    from dare.backends.decoding.dkv_cache import DkvForward

    prompts = [c["prompt_ids"] for c in OFFICIAL["cases"][:2]]
    cfg = DecodingConfig(gen_length=32, steps=32, block_length=32, threshold=0.5, cache="dkv")
    commits = [(1, 5), (3, 1), (2, 2), (0, 0)]  # tokens each row commits after steps 0..3 (steps 2, 3 cached)

    def run(rows):
        canvas = Canvas.build([prompts[r] for r in rows], 32, llada.mask_id, llada.pad_id, "cpu")
        forward, x, out = (DkvForward(llada, canvas, cfg, caches.get("dkv").Options(), canvas.gen_start),
                           canvas.tokens.clone(), [])
        for step, counts in enumerate(commits):
            with torch.inference_mode():
                logits, _ = forward(x, step == 0)
            masked = x[:, canvas.gen_start:] == llada.mask_id
            out.append(torch.where(masked[..., None], logits, 0))  # only masked columns' logits are used
            for i, r in enumerate(rows):
                cols = masked[i].nonzero()[:counts[r], 0]
                x[i, canvas.gen_start + cols] = logits[i, cols].argmax(-1)
        return out

    together, alone = run([0, 1]), [run([0]), run([1])]
    for step in range(len(commits)):
        for r in (0, 1):
            torch.testing.assert_close(together[step][r], alone[r][step][0], rtol=0, atol=1e-5)


def test_registered_with_typed_options_and_families():
    assert {"prefix", "dual", "dkv"} <= set(caches.names())
    dkv = caches.get("dkv")
    assert dkv.families == {"mdm", "dream"} and "cfg_scale" in dkv.unread
    with pytest.raises(ConfigError, match="not available for the block decoding family"):
        cache_strategy("dkv", "block")
    with pytest.raises(ConfigError, match="did you mean 'dkv'"):
        cache_strategy("dkvv")
    options = cached_decoder(decoders.get("mdm:pc_sampler"), "dkv").Options
    assert options().identity()["dkv_refresh"] == 8 and options().identity()["pc_lambda"] == 0.25
    with pytest.raises(Exception, match="dkv_refresh"):
        options.model_validate({"dkv_refresh": 0})
    assert "cfg_scale" not in cached_decoder(decoders.get("mdm:low_confidence"), "dkv").reads
    assert "dkv_refresh" not in cached_decoder(decoders.get("mdm:low_confidence"), "dual").Options.model_fields


def test_run_record_and_cache_key_carry_the_cache(tmp_path):
    from dare.harness.plan import evaluate, plan

    base = ["gen_length=16", "steps=16", "block_length=16"]
    settings = {"none": [], "dkv": ["cache=dkv"], "dkv4": ["cache=dkv", "extra={dkv_refresh: 4}"]}
    runs = {name: plan("tiny-llada", "sudoku", engine="fastdllm", overrides=[*base, *sets], limit=1, out=tmp_path)
            for name, sets in settings.items()}
    assert len({p.generation_key() for p in runs.values()}) == 3
    evaluate(runs["dkv4"])
    record = json.loads((runs["dkv4"].run_dir / "run.json").read_text())
    assert record["decoding"]["cache"] == "dkv" and "cfg_scale" not in record["decoding"]
    assert record["decoder"]["options"]["dkv_refresh"] == 4 and record["decoder"]["options"]["dkv_variant"] == "decode"


def test_listed_by_dare_eval():
    done = dare_eval("--list")
    listed = "KV caches (fastdllm; cache=..., any masked-diffusion remasking): dkv, dual, prefix"
    assert done.returncode == 0 and listed in done.stdout


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-llada", "--set", "cache=dkv", "--set", "extra={dkv_refres: 3}"], "did you mean 'dkv_refresh'"),
    (["--model", "tiny-llada", "--set", "cache=dkv", "--set", "extra={dkv_variant: greedy}"], "dkv_variant"),
    (["--model", "tiny-llada", "--set", "cache=dkv", "--set", "extra={dkv_varaint: prefill}"],
     "did you mean 'dkv_variant'"),
    (["--model", "tiny-llada", "--set", "cache=dual", "--set", "extra={dkv_refresh: 3}"],
     "not an option of decoder fastdllm:mdm:low_confidence (it is read by fastdllm:mdm:dkv_greedy)"),
    (["--model", "tiny-llada", "--set", "cache=dkv", "--set", "cfg_scale=1.0"], "cfg_scale=1.0 is not read"),
    (["--model", "tiny-dream", "--set", "cache=dkv", "--set", "extra={dkv_refresh: 1.5}"], "dkv_refresh"),
    (["--model", "tiny-sdar", "--set", "cache=dkv"], "exact block cache"),
    (["--model", "tiny-llada", "--set", "remasking=klass", "--set", "cache=dkv"], "own forward")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    done = dare_eval(*args, "--engine", "fastdllm", "--suite", "sudoku", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
