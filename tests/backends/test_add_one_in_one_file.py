"""The worked examples of docs/ARCHITECTURE.md: a commit rule and a KV cache, each added by one declaration in a
plugin module (tests/backends/toy_strategies.py), run end to end through the resolver, the engines and the record."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

import dare
from dare.harness.cli import list_everything
from dare.harness.errors import ConfigError
from dare.harness.registry import caches, decoders, load_plugins

PUZZLES = ["3102200002100320", "0230100000320401", "1004030000102003"]


@pytest.fixture
def toy():
    """Import the plugin module (its import registers both), and put the registries back afterwards."""
    load_plugins()  # the built-in entries first: the snapshot must hold them
    saved = decoders.snapshot(), caches.snapshot()
    sys.modules.pop("tests.backends.toy_strategies", None)
    yield importlib.import_module("tests.backends.toy_strategies")
    decoders.restore(saved[0])
    caches.restore(saved[1])


def _run(tmp_path, engine="torch", *sets):
    plan = dare.plan(model="tiny-llada", suite="sudoku", engine=engine, limit=3, out=tmp_path / "runs",
                     overrides=["engine.threads=1", *sets])
    record = dare.evaluate(plan)
    rows = [json.loads(line) for line in (plan.run_dir / "samples.jsonl").read_text().splitlines()]
    return record, [(r["completion"], r["nfe"]) for r in rows]


def _tokens(tmp_path, *sets):
    """Token ids and commit steps of three prompts decoded by the plan's engine, trajectories on."""
    from dare.harness.engine import GenerationRequest
    from dare.harness.records import Message

    plan = dare.plan(model="tiny-llada", suite="sudoku", limit=1, out=tmp_path / "runs",
                     overrides=["engine.threads=1", "engine.record_trajectory=true", *sets])
    requests = [GenerationRequest(f"s{i}", 0, (Message(role="user", content=f"Solve: {p}"),), seed=i)
                for i, p in enumerate(PUZZLES)]
    return plan.decoding.block_length, plan.engine.generate(requests, plan.decoding)


def test_a_commit_rule_from_a_plugin_module_is_declared_everywhere(toy, tmp_path):
    spec = decoders.get("mdm:left_bias")
    assert spec.rule is toy.left_bias and spec.Options is toy.LeftBiasOptions and spec.cacheable
    assert "mdm:left_bias" in list_everything()
    plan = dare.plan(model="tiny-llada", suite="sudoku", limit=1, out=tmp_path,
                     overrides=['remasking=left_bias', 'extra={"left_bias": 2.5}'])
    assert plan.decoder.name == "mdm:left_bias" and plan.decoder_options.left_bias == 2.5
    assert "left_bias" in dare.describe(plan)
    with pytest.raises(ConfigError, match="extra.left_bais: unknown option; did you mean 'left_bias'"):
        dare.plan(model="tiny-llada", suite="sudoku", limit=1, out=tmp_path,
                  overrides=['remasking=left_bias', 'extra={"left_bais": 1}'])
    with pytest.raises(ConfigError, match="threshold=0.9 is not read by decoder mdm:left_bias"):
        dare.plan(model="tiny-llada", suite="sudoku", limit=1, out=tmp_path, overrides=["remasking=left_bias",
                                                                                       "threshold=0.9"])


def test_a_commit_rule_from_a_plugin_module_runs_end_to_end(toy, tmp_path):
    record, plain = _run(tmp_path, "torch", "remasking=left_bias")
    assert record.decoder.name == "mdm:left_bias" and record.decoder.options["left_bias"] == 0.0
    _, reference = _run(tmp_path, "torch", "remasking=low_confidence")
    assert plain == reference  # no bias: low confidence's order
    k, generations = _tokens(tmp_path, "remasking=left_bias", 'extra={"left_bias": 100}')
    for gen in generations:  # one token per step: a large bias decodes each block left to right
        steps = gen.trajectory.commit_step
        assert all(steps[i] < steps[i + 1] for i in range(len(steps) - 1) if (i + 1) % k), steps
    _, reference = _tokens(tmp_path, "remasking=low_confidence")
    assert any(g.trajectory.commit_step != sorted(g.trajectory.commit_step) for g in reference)  # not already so


def test_a_kv_cache_from_a_plugin_module_runs_under_every_cacheable_rule(toy, tmp_path):
    assert "stale_prefix" in caches and "stale_prefix" in list_everything()
    _, uncached = _run(tmp_path, "fastdllm", "cache=none")
    record, exact = _run(tmp_path, "fastdllm", "cache=stale_prefix")
    assert exact == uncached  # a full pass every step
    assert record.decoder.options["stale_refresh"] == 1 and "cache" in record.decoding_fields
    _, stale = _run(tmp_path, "fastdllm", "cache=stale_prefix", 'extra={"stale_refresh": 1000}')
    _, prefix = _run(tmp_path, "fastdllm", "cache=prefix")
    assert stale == prefix  # refreshed at block starts only: Fast-dLLM's prefix cache
    _, both = _run(tmp_path, "fastdllm", "cache=stale_prefix", "remasking=left_bias")
    assert both == exact  # the plugin rule under the plugin cache (bias 0, exact cache: low confidence)
    with pytest.raises(ConfigError, match="cfg_scale=1.0 is not read"):
        dare.plan(model="tiny-llada", suite="sudoku", engine="fastdllm", limit=1, out=tmp_path,
                  overrides=["cache=stale_prefix", "cfg_scale=1.0"])


def test_the_rule_reads_the_options_the_resolver_built(toy, tmp_path):
    """The plan's typed options reach the rule as they are: options that say bias 100 while the config's
    ``extra`` says nothing decode left to right, so nothing re-reads ``extra`` on the way."""
    from dare.harness.engine import GenerationRequest, generate
    from dare.harness.records import Message

    plan = dare.plan(model="tiny-llada", suite="sudoku", limit=1, out=tmp_path,
                     overrides=["engine.threads=1", "engine.record_trajectory=true", "remasking=left_bias"])
    assert plan.decoding.extra == {} and plan.decoder.spec is decoders.get("mdm:left_bias")
    biased = plan.decoder_options.model_copy(update={"left_bias": 100.0})
    requests = [GenerationRequest(f"s{i}", 0, (Message(role="user", content=f"Solve: {p}"),), seed=i)
                for i, p in enumerate(PUZZLES)]
    k = plan.decoding.block_length
    for gen in generate(plan.engine, requests, plan.decoding, plan.decoder, biased):
        steps = gen.trajectory.commit_step
        assert all(steps[i] < steps[i + 1] for i in range(len(steps) - 1) if (i + 1) % k), steps
    plain = generate(plan.engine, requests, plan.decoding, plan.decoder, plan.decoder_options)
    assert any(g.trajectory.commit_step != sorted(g.trajectory.commit_step) for g in plain)


def test_the_plugin_cache_refreshes_as_its_option_says(toy, tmp_path):
    """At a step after the block start the stale prefix's logits are the prefix cache's with a large
    ``stale_refresh`` and an exact pass's with ``stale_refresh=1`` (the approximation shows: they differ)."""
    import torch

    from dare.backends.decoding.common import Canvas
    from dare.backends.decoding.fastdllm import _Forward

    plan = dare.plan(model="tiny-llada", suite="sudoku", limit=1, out=tmp_path, overrides=["engine.threads=1"])
    model = plan.engine.model
    cfg = plan.decoding.model_copy(update={"gen_length": 24, "steps": 24, "block_length": 8})
    canvas = Canvas.build([[5, 6, 7, 8, 9], [10, 11]], 24, model.mask_id, model.pad_id, "cpu")
    lo = canvas.gen_start + 8
    x = canvas.tokens.clone()
    x[:, canvas.gen_start:lo] = 65  # a finished first block before the active one

    def second_step(forward):
        with torch.inference_mode():
            forward(x, True)
            later = x.clone()
            later[:, lo:lo + 3] = 66  # commits inside the active block
            return forward(later, False)[0]

    options = caches.get("stale_prefix").Options
    stale = second_step(toy.StalePrefixForward(model, canvas, cfg, options(stale_refresh=1000), lo))
    fresh = second_step(toy.StalePrefixForward(model, canvas, cfg, options(stale_refresh=1), lo))
    prefix = second_step(_Forward(model, canvas, cfg, None, lo, "prefix"))
    exact = second_step(_Forward(model, canvas, cfg, None, lo, "none"))
    assert torch.equal(stale, prefix) and torch.allclose(fresh, exact, atol=1e-5)
    assert not torch.allclose(prefix, exact, atol=1e-5)
