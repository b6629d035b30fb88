"""PC-Sampler (mdm:pc_sampler) against the authors' code, its options and its record.

Fixtures (tests/backends/fixtures/pc_sampler_*.json; regenerate with
fixtures/scripts/make_pc_sampler_fixture.py) were produced by running NEUIR/PC-Sampler
``src/generate.py::generate_with_pc_sampler`` (commit 8b106b09877b2f69085db1b7bd7c1cc1e935d5a5) with the
shipped tiny-llada network with seeded weight noise (tests/backends/strategy_model.py: the trained model is so
sure of Sudoku that every commit rule gives the same answer; float32, CPU) in place of the Hugging Face model,
on Sudoku prompts 0-2, greedy; the background file holds the token counts of prompts 10-39 in the authors'
format. NFE: the official loop runs one forward per step, the project's count.
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
from tests.cli_here import dare_eval

from .strategy_model import noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURES = Path(__file__).parent / "fixtures"
OFFICIAL = json.loads((FIXTURES / "pc_sampler_official.json").read_text())
SETTINGS = sorted({(c["gen_length"], c["steps"], c["block_length"], c["lambd"], c["alpha"]) for c in OFFICIAL["cases"]})


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()  # the fixtures' network (see strategy_model.py)


def _decode(model, name, cases, **extra):
    first = cases[0]
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["steps"], block_length=first["block_length"],
                         remasking=name.split(":")[1], extra=extra)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decoders.get(name)(model, canvas, cfg, [torch.Generator().manual_seed(0) for _ in cases])


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"gen{s[0]}-steps{s[1]}-block{s[2]}-lambda{s[3]}")
def test_tokens_and_nfe_equal_the_authors_code_batched(llada, setting):
    cases = [c for c in OFFICIAL["cases"] if (c["gen_length"], c["steps"], c["block_length"], c["lambd"],
                                              c["alpha"]) == setting]
    options = {"pc_lambda": setting[3], "pc_alpha": setting[4],
               "pc_background": str(FIXTURES / "pc_sampler_background.json")}
    ours = _decode(llada, "mdm:pc_sampler", cases, **options)  # one batch, left-padded: rows stay independent
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases]
    plain = _decode(llada, "mdm:low_confidence", cases)
    assert plain.tokens.tolist() != [c["tokens"] for c in cases]  # the calibrated order changes the answer


def test_position_decay_and_clamp_follow_the_formula():
    from dare.backends.decoding.pc_sampler import scores

    p = torch.tensor([[0.9, 0.5, 0.2]], dtype=torch.float64)
    freq = torch.tensor([1e-4, 0.5, 1e-2], dtype=torch.float64)
    got = scores(p, torch.tensor([[0, 1, 2]]), freq, lam=0.5, alpha=2.0)
    # by hand: min(-p log(f + 1e-9), 2) * exp(-0.5 i): 0.9 * 9.21 -> 2 (clamped); 0.5 * 0.693; 0.2 * 4.605
    expected = torch.tensor([[2.0, 0.5 * 0.6931471786 * 0.6065306597, 0.2 * 4.6051700860 * 0.3678794412]],
                            dtype=torch.float64)
    torch.testing.assert_close(got, expected, rtol=1e-8, atol=0)


def test_options_are_typed_and_the_family_is_checked(llada):
    options = decoders.get("mdm:pc_sampler").Options
    assert options().identity()["pc_lambda"] == 0.25 and options().identity()["pc_alpha"] == 10.0
    with pytest.raises(Exception, match="pc_lamda"):
        options.model_validate({"pc_lamda": 1.0})
    assert "threshold" not in decoders.get("mdm:pc_sampler").reads  # quota rule only, as the authors'
    assert "dream:pc_sampler" not in decoders and "block:pc_sampler" not in decoders


def test_unreadable_background_is_one_line_config_error(llada, tmp_path):
    bad = tmp_path / "bg.json"
    bad.write_text("{}")
    cases = OFFICIAL["cases"][:1]
    with pytest.raises(ConfigError, match="pc_background"):
        _decode(llada, "mdm:pc_sampler", cases, pc_background=str(bad))


def test_run_record_and_cache_key_carry_the_options(tmp_path):
    from dare.harness.plan import evaluate, plan

    base = ["remasking=pc_sampler", "gen_length=16", "steps=16", "block_length=16"]
    background = str(FIXTURES / "pc_sampler_background.json")
    keyed = {lam: plan("tiny-llada", "sudoku",
                       overrides=[*base, f"extra={{pc_lambda: {lam}, pc_background: {background}}}"],
                       limit=1, out=tmp_path) for lam in (0.3, 0.6)}
    assert keyed[0.3].generation_key() != keyed[0.6].generation_key()
    run = keyed[0.3]
    evaluate(run)
    record = json.loads((run.run_dir / "run.json").read_text())
    assert record["decoder"]["name"] == "mdm:pc_sampler"
    assert record["decoder"]["options"]["pc_lambda"] == 0.3 and record["decoder"]["options"]["pc_alpha"] == 10.0
    assert record["decoding"]["extra"]["pc_background"] == background


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-dream", "--set", "remasking=pc_sampler"], "not available for dream"),
    (["--model", "tiny-llada", "--set", "remasking=pc_sampler", "--set", "extra={pc_lamda: 1}"],
     "did you mean 'pc_lambda'"),
    (["--model", "tiny-llada", "--set", "remasking=pc_sampler", "--set", "threshold=0.9"],
     "not read by decoder mdm:pc_sampler")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    done = dare_eval(*args, "--suite", "sudoku", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_the_rule_composes_with_the_fastdllm_caches(llada):
    from dare.backends.decoding.fastdllm import cached_decoder

    cases = [c for c in OFFICIAL["cases"] if c["block_length"] == 16]
    options = {"pc_lambda": 0.3, "pc_alpha": 2.0, "pc_background": str(FIXTURES / "pc_sampler_background.json")}
    reference = decoders.get("mdm:pc_sampler")
    uncached = _decode(llada, "mdm:pc_sampler", cases, **options)
    for mode in ("none", "dual"):
        decode = cached_decoder(reference, mode)
        first = cases[0]
        cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["steps"], block_length=first["block_length"],
                             remasking="pc_sampler", cache=mode, extra=options)
        canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, llada.mask_id, llada.pad_id, "cpu")
        with torch.inference_mode():
            got = decode(llada, canvas, cfg, [torch.Generator().manual_seed(0) for _ in cases])
        if mode == "none":
            assert torch.equal(got.tokens, uncached.tokens)
        else:
            assert got.tokens.shape == uncached.tokens.shape and (got.tokens != llada.mask_id).all()
