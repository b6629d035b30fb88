"""Fast-dLLM's prefix and dual caches against the authors' own cached loops on a trained model, token for token.

The fixture (tests/backends/fixtures/fastdllm_official.json, written by
tests/backends/fixtures/scripts/make_fastdllm_reference_fixture.py) holds what NVlabs/Fast-dLLM@24cc59e
decodes with its own network (llada/model/modeling_llada.py) and loops (llada/generate.py: ``generate``,
``generate_with_prefix_cache``, ``generate_with_dual_cache``, the last also with threshold 0.9) on the shipped
tiny-llada-long in float32, one prompt at a time: long-addition test rows 3, 36, 42 and 96, gen 160, blocks
of 32, 160 steps, greedy low_confidence.

Those rows are where the caches' approximation shows (the uncached loop adds all four right; the prefix
cache gets row 36 wrong, the dual cache all four, dual + threshold rows 3 and 42), so equal tokens mean the
same approximation, not merely the exact answer. Measured by patching our caches: a dual cache refreshed
every step (exact) differs from the fixture on all four rows; window keys never written back (stale block
KV) on three (two with the threshold); prefix / suffix keys not refreshed at each block start on all four
(one with the threshold); a prefix cache whose suffix keys stay frozen from the block start on three.
Our engine decodes the four rows as one batch of four, so batch invariance is checked beside parity.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dare.backends.engines.fastdllm import FastDllmEngine
from dare.harness import config, prompts
from dare.harness.data import load_samples
from dare.harness.engine import EngineContext, GenerationRequest, request_seed
from dare.harness.records import DecodingConfig

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "fastdllm_official.json").read_text())
MODES = {"none": {"cache": "none"}, "prefix": {"cache": "prefix"}, "dual": {"cache": "dual"},
         "dual_threshold": {"cache": "dual", "threshold": 0.9}}


@pytest.fixture(scope="module")
def long_llada():
    """The fastdllm engine on tiny-llada-long (float32 on CPU) and the fixture rows as its requests."""
    engine = FastDllmEngine(EngineContext(model_name="tiny-llada-long", model_spec=config.model("tiny-llada-long"),
                                          device="cpu"))
    bench = config.benchmark("long_addition")
    samples = load_samples(bench.data)
    template = prompts.template(bench.prompt)
    requests = [GenerationRequest(sample_id=samples[r].id, index=0, messages=template.render(samples[r]),
                                  seed=request_seed(0, samples[r].id, 0)) for r in FIXTURE["rows"]]
    return engine, requests


def test_the_fixture_cites_its_source_and_our_prompts_are_its_prompts(long_llada):
    engine, requests = long_llada
    assert FIXTURE["source"] == {"repo": "NVlabs/Fast-dLLM", "commit": "24cc59e75f20a6384bae8c905965bb090b96388e",
                                 "file": "llada/generate.py", "model_file": "llada/model/modeling_llada.py"}
    assert engine._dtype() == "float32"
    assert [r.sample_id for r in requests] == FIXTURE["sample_ids"]
    assert [engine.prompt_ids(r.messages) for r in requests] == FIXTURE["prompt_ids"]


def test_the_rows_tell_the_approximation_from_the_exact_decode():
    """The fixture bites: each cache's official tokens differ from the uncached ones on some row, and a
    wrong sum there is the official method's own (the uncached loop adds every row right)."""
    modes = FIXTURE["modes"]
    assert all(modes["none"]["correct"])
    for name in ("prefix", "dual", "dual_threshold"):
        differs = [a != b for a, b in zip(modes[name]["tokens"], modes["none"]["tokens"])]
        assert any(differs) and not all(modes[name]["correct"]), name
    assert modes["dual"]["tokens"] != modes["prefix"]["tokens"] != modes["none"]["tokens"]


@pytest.mark.parametrize("mode", ["prefix", "dual", "dual_threshold", pytest.param("none", marks=pytest.mark.slow)])
def test_cached_decoding_matches_the_official_loop_token_for_token(long_llada, mode):
    engine, requests = long_llada
    official = FIXTURE["modes"][mode]
    cfg = DecodingConfig(**FIXTURE["decoding"], batch_size=len(requests), **MODES[mode])
    assert official["threshold"] == cfg.threshold
    out = engine.generate(requests, cfg)
    assert [g.token_ids for g in out] == official["tokens"]
    assert [g.nfe_official for g in out] == official["nfe"]  # the official loops' own count
