"""EB-Sampler (mdm:eb_sampler, dream:eb_sampler): the paper's bound by hand, d2Cache's implementation, refusals.

The paper's authors published no code. Fixture tests/backends/fixtures/eb_sampler_d2cache.json (regenerate with
fixtures/scripts/make_eb_sampler_fixture.py): Kamichanw/d2Cache ``vanilla_generate`` with ``gamma`` (commit
72feb60bb288a5a4d14b4bab9afbbaa1fc1b509a, src/generation/vanilla.py ``confidence_unmasking``), ``alg="entropy"``,
at least one token per step, on the noisy tiny-llada and Sudoku prompts 0-2, greedy, batch 1 there.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.backends.decoding.eb_sampler import bounded_count
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders
from tests.cli_here import dare_eval

from .strategy_model import noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "eb_sampler_d2cache.json").read_text())
KEYS = ("gen_length", "block_length", "gamma")
SETTINGS = sorted({tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]})


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()


def _decode(model, name, cases, extra, **fields):
    first = cases[0]
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["gen_length"], block_length=first["block_length"],
                         remasking=name.split(":")[1], extra=extra, **fields)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        return decoders.get(name)(model, canvas, cfg, [torch.Generator().manual_seed(0) for _ in cases])


def _cases(setting):
    return [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]


def test_bound_by_hand():
    # entropies in the order taken 1/8, 1/4, 1/2, 3/4, 3/2: prefix sums less prefix maxima 0, 1/8, 3/8, 7/8, 13/8
    entropy = torch.tensor([[0.125, 0.25, 0.5, 1.5, 0.75]], dtype=torch.float64)
    order = torch.tensor([[0, 1, 2, 4, 3]])
    everything = torch.ones(1, 5, dtype=torch.bool)
    gammas = (0.0, 0.125, 0.3, 0.375, 0.875, 1.6, 1.625)
    assert [int(bounded_count(entropy, order, everything, g)) for g in gammas] == [1, 2, 2, 3, 4, 4, 5]
    # an order that is not by entropy (3/2 first): the prefix maximum is left out, not the last entropy
    unsorted = torch.tensor([[3, 0, 1, 2, 4]])  # sums less max 0, 1/8, 3/8, 7/8, 13/8
    assert int(bounded_count(entropy, unsorted, everything, 0.4)) == 3
    # only candidates count, and a row without any commits nothing
    some = torch.tensor([[True, False, True, False, False]])
    assert int(bounded_count(entropy, torch.tensor([[0, 2, 1, 3, 4]]), some, 10.0)) == 2
    assert int(bounded_count(entropy, order, torch.zeros_like(some), 10.0)) == 0


def test_rule_commits_the_lowest_entropy_first_and_more_as_gamma_grows():
    rule = decoders.get("mdm:eb_sampler")
    logits = torch.randn(2, 8, 50, generator=torch.Generator().manual_seed(3)) * torch.arange(1, 9)[None, :, None]
    masked = torch.ones(2, 8, dtype=torch.bool)
    masked[1, :3] = False
    cfg = DecodingConfig(gen_length=8, steps=8, block_length=8, remasking="eb_sampler")
    probs = logits.double().softmax(-1)
    entropy = -(probs * probs.log()).sum(-1)
    counts = []
    for gamma in (0.0, 0.5, 2.0, math.inf):
        opts = rule.Options(eb_gamma=gamma)
        commit, _ = rule.rule(logits, masked, torch.ones(2, dtype=torch.long), 0, 8, None, cfg, opts, None)
        counts.append(commit.sum(-1).tolist())
        if gamma == 0.0:  # one token: the masked position of lowest entropy
            lowest = entropy.masked_fill(~masked, math.inf).argmin(-1)
            assert commit.nonzero()[:, 1].tolist() == lowest.tolist()
    assert counts[0] == [1, 1] and counts[-1] == [8, 5]
    assert all(a[r] <= b[r] for a, b in zip(counts, counts[1:]) for r in range(2))


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"g{s[0]}-b{s[1]}-gamma{s[2]}")
def test_tokens_and_nfe_equal_d2caches_implementation_batched(llada, setting):
    cases = _cases(setting)
    ours = _decode(llada, "mdm:eb_sampler", cases, {"eb_gamma": setting[2]})
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases]


def test_gamma_zero_is_one_token_per_step_and_a_large_gamma_commits_more(llada):
    one_per_step = _cases((32, 32, 0.01))
    assert all(c["nfe"] == c["gen_length"] for c in one_per_step)  # 0.01 is below every bound here
    zero = _decode(llada, "mdm:eb_sampler", one_per_step, {"eb_gamma": 0.0})
    assert zero.tokens.tolist() == [c["tokens"] for c in one_per_step] and zero.nfe.tolist() == [32] * 3
    wide = _decode(llada, "mdm:eb_sampler", one_per_step, {"eb_gamma": 3.0})
    assert all(n < 16 for n in wide.nfe.tolist())
    plain = _decode(llada, "mdm:low_confidence", one_per_step, {})
    assert plain.tokens.tolist() != zero.tokens.tolist()  # the entropy order is not the confidence order here


def test_options_reads_and_record_key(tmp_path):
    from dare.harness.plan import evaluate, plan

    for family in ("mdm", "dream"):
        decode = decoders.get(f"{family}:eb_sampler")
        assert decode.Options().identity()["eb_gamma"] == 0.01 and decode.Options().eb_proxy == "entropy"
        assert decode.cacheable and {"threshold", "factor"}.isdisjoint(decode.reads)
    assert "block:eb_sampler" not in decoders
    base = ["remasking=eb_sampler", "gen_length=32", "steps=32", "block_length=16"]
    keyed = {g: plan("tiny-llada", "sudoku", overrides=[*base, f"extra={{eb_gamma: {g}}}"], limit=2, out=tmp_path)
             for g in (0.01, 1.0)}
    assert keyed[0.01].generation_key() != keyed[1.0].generation_key()
    evaluate(keyed[1.0])
    record = json.loads((keyed[1.0].run_dir / "run.json").read_text())
    assert record["decoder"]["name"] == "mdm:eb_sampler" and record["decoder"]["options"]["eb_gamma"] == 1.0
    assert record["decoder"]["options"]["eb_proxy"] == "entropy"


def _cli(*args):
    return dare_eval(*args, "--suite", "sudoku", "--dry-run")


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-sdar", "--set", "remasking=eb_sampler"], "not available for"),
    (["--model", "tiny-llada", "--set", "remasking=eb_sampler", "--set", "extra={eb_gama: 1}"],
     "did you mean 'eb_gamma'"),
    (["--model", "tiny-dream", "--set", "remasking=eb_sampler", "--set", "extra={eb_proxy: random}"], "eb_proxy"),
    (["--model", "tiny-llada", "--set", "remasking=eb_sampler", "--set", "threshold=0.9"],
     "not read by decoder mdm:eb_sampler")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    done = _cli(*args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_runs_under_a_kv_cache():
    done = _cli("--model", "tiny-llada", "--engine", "fastdllm", "--set", "remasking=eb_sampler", "--set", "cache=dual")
    assert done.returncode == 0, done.stderr
