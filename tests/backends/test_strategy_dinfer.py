"""dInfer's decoders (mdm/dream:dinfer_threshold, dinfer_credit, dinfer_hierarchy) against the authors' code.

Fixture tests/backends/fixtures/dinfer_official.json (regenerate with fixtures/scripts/make_dinfer_fixture.py):
inclusionAI/dInfer@fce4e32804103baa5d55230dff0352da0cdd6ceb. Per call: ``ThresholdParallelDecoder``,
``HierarchyDecoder`` and ``CreditThresholdParallelDecoder`` ``.decode`` (python/dinfer/decoding/
parallel_strategy.py) on seeded random logits, the credit decoder over call sequences with its reset. Per
sequence: ``BlockWiseDiffusionLLM.generate`` (generate_uniform.py; aligned first block, early stop, unrolled
rounds) with our networks behind their ``model(x).logits``: the noisy tiny-llada (tests/backends/strategy_model.py)
on Sudoku prompts 0-2 (1 and 2 cut short, so each row's blocks are aligned differently), the shipped tiny-dream
(random weights, their ``use_shift`` loop) on prompts 0-1; batch 1 there, one left-padded batch here.
"""

from __future__ import annotations

import base64
import copy
import json
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.backends.decoding.dinfer_rules import CreditMemory
from dare.backends.engines.torch import TorchEngine
from dare.harness import config
from dare.harness.engine import EngineContext
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .strategy_model import assert_dry_run_refused, noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "dinfer_official.json").read_text())
for _family in ("llada", "dream"):
    for _case in OFFICIAL[_family]:
        _case["prompt_ids"] = OFFICIAL[f"{_family}_prompt_ids"][_case["sample"]]
IDS = types.SimpleNamespace(mask_id=OFFICIAL["per_call_ids"]["mask"], eos_id=OFFICIAL["per_call_ids"]["eos"])
KEYS = ("decoder", "gen_length", "block_length", "threshold", "float64", "maximum_unroll", "expected_tpf", "align",
        "low_threshold")


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()  # the fixtures' network (see strategy_model.py)


@pytest.fixture(scope="module")
def dream():
    context = EngineContext(model_name="tiny-dream", model_spec=config.model("tiny-dream"), device="cpu")
    return TorchEngine(context).model


def _extra(case) -> dict:
    names = {"align": "dinfer_align_first_block", "maximum_unroll": "dinfer_max_unroll", "float64": "dinfer_float64",
             "expected_tpf": "dinfer_expected_tpf", "low_threshold": "dinfer_low_threshold"}
    return {ours: case[theirs] for theirs, ours in names.items() if case.get(theirs) is not None}


def _groups(cases):
    groups = {}
    for case in cases:
        groups.setdefault(tuple(case.get(k) for k in KEYS), []).append(case)
    return list(groups.values())


def _decode(model, family, remasking, cases, extra, threshold, temperature=0.0, seeds=None):
    first = cases[0]
    cfg = DecodingConfig(gen_length=first["gen_length"], steps=first["gen_length"], block_length=first["block_length"],
                         remasking=remasking, threshold=threshold, extra=extra, temperature=temperature)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    gens = [torch.Generator().manual_seed(s) for s in (seeds or [0] * len(cases))]
    with torch.inference_mode():
        return decoders.get(f"{family}:{remasking}")(model, canvas, cfg, gens)


def _official(model, family, cases):
    first = cases[0]
    return _decode(model, family, f"dinfer_{first['decoder']}", cases, _extra(first), first["threshold"])


def _logits(case) -> torch.Tensor:
    values = np.frombuffer(base64.b64decode(case["logits_f32_b64"]), dtype="<f4").reshape(case["shape"])
    return torch.tensor(values.copy()).to(getattr(torch, case["dtype"]))


def _rule(kind, logits, x, block, memory=None, keys=None, **extra):
    """One call of our rule as the loop makes it -> the block's tokens after the commit."""
    spec = decoders.get(f"mdm:dinfer_{kind}")
    before = x[:, block[0]:block[1]]
    masked = before == IDS.mask_id
    rows = torch.arange(x.shape[0])
    keys = torch.zeros_like(rows) if keys is None else keys
    cfg = DecodingConfig(remasking=f"dinfer_{kind}", threshold=extra.pop("threshold"))
    commit, x0 = spec.rule(logits, masked, rows, keys, memory or CreditMemory(len(rows)), [], cfg,
                           spec.Options(**extra), IDS)
    return torch.where(commit & masked, x0, before)


@pytest.mark.parametrize("index", range(len([c for c in OFFICIAL["calls"]])))
def test_one_call_commits_what_the_authors_decoder_commits(index):
    case = OFFICIAL["calls"][index]
    logits = _logits(case)
    x = torch.tensor(case["x_before"])
    extra = {"threshold": case["threshold"]}
    if case["kind"] == "threshold":
        extra["dinfer_float64"] = case["float64"]
    else:
        extra["dinfer_low_threshold"] = case["low_threshold"]
    assert _rule(case["kind"], logits, x, case["block"], **extra).tolist() == case["x_after"]


def test_hierarchy_quirk_is_the_logits_dtype():
    """bfloat16 confidences tie where float64 ones do not: the quirk switch changes the commits."""
    changed = 0
    for case in (c for c in OFFICIAL["calls"] if c["kind"] == "hierarchy"):
        logits, x = _logits(case), torch.tensor(case["x_before"])
        extra = {"threshold": case["threshold"], "dinfer_low_threshold": case["low_threshold"]}
        changed += _rule("hierarchy", logits, x, case["block"], dinfer_official_quirk=False, **extra).tolist() != \
            case["x_after"]
    assert changed > 0


@pytest.mark.parametrize("sequence", OFFICIAL["credit"], ids=lambda s: f"alpha{s['credit_alpha']}")
def test_credit_state_follows_the_authors_over_calls(sequence):
    extra = {"dinfer_credit_alpha": sequence["credit_alpha"], "dinfer_boost_gamma": sequence["boost_gamma"],
             "dinfer_decay_beta": sequence["decay_beta"], "threshold": sequence["threshold"]}
    memory, current, plain_differs = None, None, False
    for call in sequence["calls"]:
        if call["sequence"] != current:  # a new decode: a new memory
            memory, current = CreditMemory(2), call["sequence"]
        logits, x = _logits(call), torch.tensor(call["x_before"])
        keys = torch.full((2,), call["block"][0] // 6)
        ours = _rule("credit", logits, x, call["block"], memory, keys, **extra)
        assert ours.tolist() == [row[call["block"][0]:call["block"][1]] for row in call["x_after"]]
        plain = _rule("threshold", logits, x, call["block"], threshold=sequence["threshold"])
        plain_differs |= plain.tolist() != ours.tolist()
    assert plain_differs  # the credit changed what was committed
    restart = [c for c in sequence["calls"] if c["sequence"] == 1][0]
    assert restart["state_keys"] == [restart["block"]]  # theirs was cleared when no mask was left


def _label(cases):
    case = cases[0]
    return "-".join(f"{k}{case[k]}" for k in KEYS if k in case and k != "decoder").join((case["decoder"] + "-", ""))


#: one setting per decoder runs by default, the rest with -m slow
FAST = {"threshold-gen_length64-block_length32-threshold0.9", "threshold-gen_length48-block_length16-threshold0.5-"
        "maximum_unroll2-expected_tpf2", "credit-gen_length64-block_length32-threshold0.9",
        "hierarchy-gen_length64-block_length32-threshold0.9-low_threshold0.4", "threshold-gen_length40-block_length20-"
        "threshold0.9", "hierarchy-gen_length40-block_length20-threshold0.9-low_threshold0.01"}


def _params(cases):
    return [pytest.param(g, id=_label(g), marks=() if _label(g) in FAST else pytest.mark.slow) for g in _groups(cases)]


@pytest.mark.parametrize("cases", _params(OFFICIAL["llada"]))
def test_llada_tokens_and_nfe_equal_the_authors_code_batched(llada, cases):
    ours = _official(llada, "mdm", cases)  # one left-padded batch: each row decodes as alone
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe_official.tolist() == [c["nfe"] for c in cases]
    assert (ours.nfe <= ours.nfe_official).all()
    if cases[0].get("maximum_unroll") == 2:  # rounds of two forwards: some second forwards find the block full
        assert (ours.nfe < ours.nfe_official).any()


@pytest.mark.parametrize("cases", _params(OFFICIAL["dream"]))
def test_dream_tokens_and_nfe_equal_the_authors_shifted_loop(dream, cases):
    ours = _official(dream, "dream", cases)
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe_official.tolist() == [c["nfe"] for c in cases]
    if cases[0]["decoder"] == "threshold":  # blocks from the prompt's end, one token per step: other tokens
        assert _decode(dream, "dream", "low_confidence", cases, {}, None).tokens.tolist() != ours.tokens.tolist()


def test_distinctive_steps_change_the_tokens(llada):
    """On the fixture's prompts each rule commits otherwise than plain low confidence (one token per step, blocks
    from the prompt's end) and than the threshold rule; the aligned first block otherwise than blocks from the
    prompt's end."""
    cases = [c for c in OFFICIAL["llada"] if _label([c]) == "threshold-gen_length64-block_length32-threshold0.9"]
    plain = _decode(llada, "mdm", "low_confidence", cases, {}, None).tokens.tolist()
    threshold = _decode(llada, "mdm", "dinfer_threshold", cases, {}, 0.9).tokens.tolist()
    assert threshold != plain
    for remasking in ("dinfer_credit", "dinfer_hierarchy"):
        tokens = _decode(llada, "mdm", remasking, cases, {}, 0.9).tokens.tolist()
        assert tokens != threshold and tokens != plain
    unaligned = _decode(llada, "mdm", "dinfer_threshold", cases, {"dinfer_align_first_block": False}, 0.9)
    assert unaligned.tokens.tolist() != threshold


def test_early_stop_quirk_sees_eos_in_the_prompt_tail(llada):
    """The first aligned block holds the prompt's last tokens; with the authors' quirk an EOS there ends the row after
    that block, without it only generated EOS tokens do."""
    prompt = list(OFFICIAL["llada_prompt_ids"][1])
    prompt[-2] = llada.eos_id  # inside the first block of 32 (the prompt's last 61 % 32 = 29 tokens)
    case = [{"prompt_ids": prompt, "gen_length": 64, "block_length": 32}]
    quirk = _decode(llada, "mdm", "dinfer_threshold", case, {}, 0.9)
    plain = _decode(llada, "mdm", "dinfer_threshold", case, {"dinfer_official_quirk": False}, 0.9)
    first = 32 - len(prompt) % 32
    assert quirk.tokens[0, first:].eq(llada.eos_id).all() and quirk.commit_step[0, first:].eq(-1).all()
    assert plain.commit_step[0, first:].ge(0).any() and plain.nfe.item() > quirk.nfe.item()


class _MaskFirst(torch.nn.Module):
    """An output head whose mask-token logit beats every other."""

    def __init__(self, head, mask_id):
        super().__init__()
        self.head, self.mask_id = head, mask_id

    def forward(self, hidden):
        logits = self.head(hidden).clone()
        logits[..., self.mask_id] += 1e4
        return logits


@pytest.mark.timeout(120)  # without the fallback the loop would never end, as theirs
@pytest.mark.parametrize("remasking", ["dinfer_threshold", "dinfer_hierarchy"])
def test_a_model_that_proposes_only_the_mask_still_finishes(llada, remasking):
    """Where every proposal is the mask token their loop repeats one forward forever; here the row commits its most
    probable other token, one per forward."""
    stuck = copy.copy(llada)  # the loop reads the network's hidden states and its head
    stuck.net = types.SimpleNamespace(hidden_states=llada.net.hidden_states,
                                      lm_head=_MaskFirst(llada.net.lm_head, llada.mask_id))
    case = [{"prompt_ids": OFFICIAL["llada_prompt_ids"][0], "gen_length": 32, "block_length": 32}]
    result = _decode(stuck, "mdm", remasking, case, {"dinfer_align_first_block": False}, 0.9)
    plain = _decode(llada, "mdm", "low_confidence", case, {}, None)  # the same model without the mask's boost
    assert llada.mask_id not in result.tokens.tolist()[0]
    written = result.commit_step[0][result.commit_step[0] >= 0]
    assert sorted(written.tolist()) == list(range(len(written)))  # one token per forward
    assert result.tokens[0, :len(written)].tolist() == plain.tokens[0, :len(written)].tolist()


def test_sampled_rows_do_not_depend_on_their_neighbours(llada):
    cases = [dict(c, prompt_ids=p) for c, p in zip([{"gen_length": 32, "block_length": 16}] * 3,
                                                  OFFICIAL["llada_prompt_ids"])]

    def run(rows):
        picked = [cases[r] for r in rows]
        return _decode(llada, "mdm", "dinfer_credit", picked, {}, 0.7, temperature=0.8, seeds=rows).tokens.tolist()

    batch, alone, swapped = run([0, 1, 2]), run([1]), run([2, 1])
    assert batch[1] == alone[0] == swapped[1] and batch[2] == swapped[0]


def test_options_reads_and_families():
    threshold, credit, hierarchy = (decoders.get(f"mdm:dinfer_{k}") for k in ("threshold", "credit", "hierarchy"))
    assert credit.Options().identity() == {
        "record_trajectory": False, "dinfer_threshold": 0.9, "dinfer_align_first_block": True,
        "dinfer_expected_tpf": 8, "dinfer_max_unroll": 4, "dinfer_official_quirk": True, "dinfer_float64": False,
        "dinfer_credit_alpha": 0.7, "dinfer_boost_gamma": 0.2, "dinfer_decay_beta": 0.8, "dinfer_cache": "none",
        "dinfer_prefix_look": 16, "dinfer_after_look": 16, "dinfer_warmup_steps": 4, "dinfer_cache_update_freq": None}
    assert hierarchy.Options().identity()["dinfer_low_threshold"] == 0.4
    assert "dinfer_float64" not in hierarchy.Options.model_fields
    for spec in (threshold, credit, hierarchy):
        assert "threshold" in spec.reads and {"cfg_scale", "factor", "cache"}.isdisjoint(spec.reads)
        assert "dInfer" in spec.rules["threshold"] and not spec.cacheable
        assert f"dream:{spec.remasking}" in decoders and f"block:{spec.remasking}" not in decoders


def test_recorded_keyed_and_run_by_the_engine(tmp_path):
    """Each option is in the generation key; a run through dare.plan / dare.evaluate on the shipped tiny-llada
    records the decoder, its options and rule, and both NFE counts, and solves Sudoku with the defaults."""
    from dare.harness.plan import evaluate, plan

    base = ["remasking=dinfer_credit", "gen_length=32", "steps=32", "block_length=32"]
    plans = {extra: plan("tiny-llada", "sudoku", overrides=[*base, f"extra={{{extra}}}"], limit=2, out=tmp_path)
             for extra in ("", "dinfer_decay_beta: 0.5", "dinfer_max_unroll: 2", "dinfer_official_quirk: false")}
    assert len({p.generation_key() for p in plans.values()}) == len(plans)
    run = plans[""]
    evaluate(run)
    record = json.loads((run.run_dir / "run.json").read_text())
    decoder = record["decoder"]
    assert decoder["name"] == "mdm:dinfer_credit" and decoder["options"]["dinfer_credit_alpha"] == 0.7
    assert "dInfer" in record["decoder"]["rules"]["threshold"]
    assert record["metrics"]["sudoku"]["accuracy"]["value"] > 0
    rows = [json.loads(line) for line in (run.run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]
    assert all(0 < r["nfe"] <= r["nfe_official"] for r in rows)


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-sdar", "--set", "remasking=dinfer_threshold"], "not available for"),
    (["--model", "tiny-llada", "--set", "remasking=dinfer_credit", "--set", "extra={dinfer_credit_alpa: 1}"],
     "did you mean 'dinfer_credit_alpha'"),
    (["--model", "tiny-llada", "--set", "remasking=dinfer_hierarchy", "--set", "extra={dinfer_float64: true}"],
     "dinfer_float64"),
    (["--model", "tiny-llada", "--set", "remasking=dinfer_threshold", "--set", "cfg_scale=1.0"], "cfg_scale"),
    (["--model", "tiny-llada", "--engine", "fastdllm", "--set", "remasking=dinfer_threshold", "--set", "cache=dual"],
     "cache")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    assert_dry_run_refused(args, message)
