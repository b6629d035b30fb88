"""NFE is defined once (the forwards actually run) and the official-equivalent count is pinned to the
official implementations' numbers.

The official numbers below come from running the authors' loops on a stub network (random logits, so
the counts depend on the loop's structure only; every setting here is one where that holds):

- NVlabs/Fast-dLLM@24cc59e75f20a6384bae8c905965bb090b96388e, llada/generate.py, functions ``generate``,
  ``generate_with_prefix_cache`` and ``generate_with_dual_cache`` (the ``nfe`` they return), with
  gen_length=16, block_length=4. threshold=1e-9 commits every token of a block in its first pass; the cached
  loops still run one cached pass after it (``while True: nfe += 1; ...``), the uncached one does not.
- JetAstra/SDAR@c2041a8333333d685f6e15122c84f60f51f85ebd, generate.py, ``block_diffusion_generate`` (forward
  calls counted), prompt of 8 tokens (two complete prompt blocks), gen_length=16, block_length=4, no stop
  criteria: 1 prefill + per block ``denoising_steps`` denoising passes + 1 ``store_kv`` pass, the last
  block included.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.backends.decoding.fastdllm import cached_decoder
from dare.backends.models.loader import load_model
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

# (mode, steps, threshold) -> official nfe per sequence (Fast-dLLM llada/generate.py, gen 16, blocks of 4)
FAST_DLLM_OFFICIAL = {
    ("none", 16, None): 16, ("none", 16, 1e-9): 4, ("none", 16, 1.0): 16, ("none", 8, None): 8,
    ("prefix", 16, None): 16, ("prefix", 16, 1e-9): 8, ("prefix", 16, 1.0): 16, ("prefix", 8, None): 8,
    ("dual", 16, None): 16, ("dual", 16, 1e-9): 8, ("dual", 16, 1.0): 16, ("dual", 8, None): 8,
}
# (steps per block, remasking) -> official forwards (SDAR generate.py, prompt 8, gen 16, blocks of 4)
SDAR_OFFICIAL = {(4, "low_confidence_static"): 21, (2, "low_confidence_static"): 13,
                 (4, "low_confidence_dynamic"): 21}

POLICIES = {"llada": "mdm:low_confidence", "dream": "dream:maskgit_plus"}  # confidence = probability


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("nfe_models")
    return {arch: load_model(write_tiny_checkpoint(arch, root / arch, seed=3)) for arch in ("llada", "dream", "sdar")}


def _canvas(model, prompts, gen):
    return Canvas.build(prompts, gen, model.mask_id, model.pad_id, "cpu", tail=4)


@pytest.mark.parametrize("arch", ["llada", "dream"])
@pytest.mark.parametrize("key", sorted(FAST_DLLM_OFFICIAL, key=str), ids=str)
def test_fast_dllm_counts_match_the_official_loops(models, arch, key):
    mode, steps, threshold = key
    model = models[arch]
    cfg = DecodingConfig(gen_length=16, block_length=4, steps=steps, threshold=threshold)
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15]]
    gens = [torch.Generator().manual_seed(i) for i in range(len(prompts))]
    with torch.inference_mode():
        result = cached_decoder(decoders.get(POLICIES[arch]), mode)(model, _canvas(model, prompts, 16), cfg, gens)
    assert result.nfe_official.tolist() == [FAST_DLLM_OFFICIAL[key]] * 2
    # the forwards run: one per step, the block-start pass being step 0 (a full block after it: no more)
    per_block = 1 if threshold == 1e-9 else (steps // 4 if threshold is None else 4)
    assert result.nfe.tolist() == [4 * per_block] * 2


def test_fast_dllm_extra_pass_is_counted_per_completed_block(models):
    """A sharp model under a middling threshold completes some blocks in their first pass and not others:
    the official count is the forwards plus one per block whose tokens were all committed at its step 0."""
    model = copy.copy(models["llada"])
    model.net = copy.deepcopy(model.net)
    with torch.no_grad():
        model.net.lm_head.weight.mul_(40.0)
    cfg = DecodingConfig(gen_length=32, block_length=4, steps=32, threshold=0.6,
                         extra={"record_trajectory": True})
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12], [40, 41, 42, 43, 44, 45, 46]]
    gens = [torch.Generator().manual_seed(i) for i in range(len(prompts))]
    with torch.inference_mode():
        result = cached_decoder(decoders.get("mdm:low_confidence"), "dual")(model, _canvas(model, prompts, 32), cfg,
                                                                             gens)
    steps = result.commit_step.view(len(prompts), 8, 4)
    one_pass = (steps.amax(-1) == steps.amin(-1)).sum(-1)  # blocks whose tokens share one step: step 0
    assert 0 < int(one_pass.sum()) < 3 * 8, "the case needs both kinds of block"
    assert torch.equal(result.nfe_official, result.nfe + one_pass)


@pytest.mark.parametrize("key", sorted(SDAR_OFFICIAL, key=str), ids=str)
def test_sdar_counts_match_the_official_sampler(models, key):
    per_block, remasking = key
    model = copy.copy(models["sdar"])
    model.stop_ids = []  # the official run had no stopping criteria: every block is decoded
    cfg = DecodingConfig(gen_length=16, block_length=4, steps=4 * per_block, remasking=remasking, threshold=None)
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15, 16, 17, 18, 19, 20]]
    gens = [torch.Generator().manual_seed(i) for i in range(len(prompts))]
    with torch.inference_mode():
        result = decoders.get(f"block:{remasking}")(model, _canvas(model, prompts, 16), cfg, gens)
    assert result.nfe_official.tolist() == [SDAR_OFFICIAL[key]] * 2
    # forwards run: the prefill, the denoising steps, and the stores of the 3 blocks a later block reads
    assert result.nfe.tolist() == [1 + 4 * per_block + 3] * 2


def test_sdar_stopped_row_counts_the_store_of_its_last_block(models):
    """A row that stops early decoded fewer blocks; its official count still adds one store pass."""
    model = models["sdar"]
    cfg = DecodingConfig(gen_length=32, block_length=4, steps=32, remasking="low_confidence_static")
    prompts = [[5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15, 16]]
    gens = [torch.Generator().manual_seed(i) for i in range(len(prompts))]
    with torch.inference_mode():
        result = decoders.get("block:low_confidence_static")(model, _canvas(model, prompts, 32), cfg, gens)
    decoded = result.commit_step.view(2, 8, 4).ge(0).any(-1).sum(-1)  # blocks each row decoded
    assert torch.equal(result.nfe, 1 + 4 * decoded + (decoded - 1))
    assert torch.equal(result.nfe_official, 1 + 5 * decoded)


@pytest.mark.extended
def test_the_record_shows_both_counts(tmp_path):
    """dare-eval on the shipped tiny-sdar: every samples.jsonl row carries nfe and nfe_official (one more:
    the store pass of the row's last block)."""
    from .helpers import dare_eval, run_record

    run_dir, record = run_record(dare_eval("--model", "tiny-sdar", "--suite", "sudoku", "--limit", "3",
                                           "--out", str(tmp_path / "runs")))
    rows = [json.loads(line) for line in (run_dir / record["samples_path"]).read_text().splitlines()]
    assert len(rows) == 3 and all(r["nfe"] > 0 and r["nfe_official"] == r["nfe"] + 1 for r in rows)
