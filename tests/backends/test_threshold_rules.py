"""``threshold`` means one rule per decoder, and the decoder says which (``decode.rules``).

Fast-dLLM's rule (mask diffusion: LLaDA, Dream) commits the most confident masked position plus every one
with confidence >= tau; SDAR's dynamic rule (and LLaDA2.0) commits those > tau when there are at least the
step's quota of them, else the top quota; LLaDA2.1's editing rule floors at ``num_to_transfer``. The same
``threshold=0.65`` thus commits different sets: the reference rules below are written from those
definitions (NVlabs/Fast-dLLM llada/generate.py ``get_transfer_index``; JetAstra/SDAR generate.py
``low_confidence_dynamic``; spec models_decoding.md 2.4-2.6), and each registered decoder must behave as the
rule it declares. --dry-run prints the rule, --list groups the decoders by rule, run.json records it.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest
import torch

import dare
from dare.backends.decoding.common import (
    FACTOR,
    THRESHOLD_DINFER,
    THRESHOLD_FLOOR,
    THRESHOLD_HIERARCHY,
    THRESHOLD_QUOTA,
    THRESHOLD_TOP1,
)
from dare.harness import cli
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders
from dare.harness.runner import build_record

CONF = [0.95, 0.7, 0.6, 0.55]  # four masked positions of one block
CANDIDATES = [True, True, True, True]


def top1(conf, tau, quota, floor):
    best = max(range(len(conf)), key=lambda i: conf[i])
    return [i == best or c >= tau for i, c in enumerate(conf)]


def quota_floor(conf, tau, quota, floor):
    above = [c > tau for c in conf]
    if sum(above) >= quota:
        return above
    ranked = sorted(range(len(conf)), key=lambda i: -conf[i])[:quota]
    return [i in ranked for i in range(len(conf))]


def transfer_floor(conf, tau, quota, floor):
    return quota_floor(conf, tau, floor, floor)


REFERENCE = {THRESHOLD_TOP1: top1, THRESHOLD_QUOTA: quota_floor, THRESHOLD_FLOOR: transfer_floor}
CASES = [(0.65, 3, 1), (0.65, 1, 2), (0.99, 2, 3), (0.5, 2, 1)]  # (tau, step quota, num_to_transfer)


def test_the_rules_differ_on_these_cases():
    """Otherwise the behaviour test below could not tell a decoder with the wrong rule."""
    for a in REFERENCE.values():
        for b in REFERENCE.values():
            if a is not b:
                assert any(a(CONF, *case) != b(CONF, *case) for case in CASES)


def test_every_decoder_that_reads_a_commit_field_declares_its_rule():
    for name in decoders.names():
        decode = decoders.get(name)
        for field_name in ("threshold", "factor"):
            if field_name in decode.reads:
                assert field_name in decode.rules, f"{name} reads {field_name} without declaring its rule"
        assert set(decode.rules) <= set(decode.reads)
        assert set(decode.rules.values()) <= {THRESHOLD_TOP1, THRESHOLD_QUOTA, THRESHOLD_FLOOR, FACTOR,
                                              THRESHOLD_DINFER, THRESHOLD_HIERARCHY}
    assert decoders.get("mdm:low_confidence").rules["threshold"] == THRESHOLD_TOP1
    assert decoders.get("block:low_confidence_dynamic").rules["threshold"] == THRESHOLD_QUOTA


def _logits(conf) -> torch.Tensor:
    """(1, K, 2) logits whose softmax gives token 0 probability ``conf[k]`` (the greedy confidence)."""
    return torch.tensor([[[math.log(c), math.log(1 - c)] for c in conf]], dtype=torch.float32)


def _commits(decode, tau, quota, floor) -> list[bool]:
    floors = decode.rules["threshold"] == THRESHOLD_FLOOR  # only LLaDA2.1's editing rule has the floor option
    cfg = DecodingConfig(gen_length=4, steps=4, block_length=4, threshold=tau,
                         remasking="editing" if floors else "low_confidence",
                         extra={"num_to_transfer": floor} if floors else {})
    candidates = torch.tensor([CANDIDATES])
    opts = decode.options(cfg)
    if decode.family == "block":  # block rules: (conf, candidates, quota, cfg, opts) -> commit
        conf = torch.tensor([CONF], dtype=torch.float64)
        return decode.rule(conf, candidates, torch.tensor([quota]), cfg, opts)[0].tolist()
    commit, x0 = decode.rule(_logits(CONF), candidates, torch.tensor([quota]), 0, 4, [torch.Generator()], cfg, opts,
                             None)
    assert x0.tolist() == [[0, 0, 0, 0]]
    return commit[0].tolist()


# the decoders whose confidence is the proposal's probability (or given directly): the crafted logits fix it
PROBABILITY_CONFIDENCE = ["mdm:low_confidence", "dream:maskgit_plus", "block:low_confidence",
                          "block:low_confidence_dynamic", "block:editing"]


@pytest.mark.parametrize("name", PROBABILITY_CONFIDENCE)
def test_each_decoder_commits_by_the_rule_it_declares(name):
    decode = decoders.get(name)
    reference = REFERENCE[decode.rules["threshold"]]
    for case in CASES:
        assert _commits(decode, *case) == reference(CONF, *case), (name, case)


def test_dry_run_and_list_show_the_rule(capsys, tmp_path):
    base = ["--suite", "sudoku", "--limit", "1", "--no-progress", "--dry-run", "--out", str(tmp_path), "--set",
            "threshold=0.9"]
    assert cli.main(["--model", "tiny-llada", *base]) == 0
    llada = capsys.readouterr().out
    assert cli.main(["--model", "tiny-sdar", *base, "--set", "remasking=low_confidence_dynamic"]) == 0
    sdar = capsys.readouterr().out
    assert f"decoder rule for threshold: {THRESHOLD_TOP1}" in llada
    assert f"decoder rule for threshold: {THRESHOLD_QUOTA}" in sdar
    assert cli.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert "block:low_confidence_dynamic" in next(line for line in listed.splitlines() if THRESHOLD_QUOTA in line)
    assert "mdm:low_confidence" in next(line for line in listed.splitlines() if THRESHOLD_TOP1 in line)


def test_the_record_names_the_rule(tmp_path):
    plan = dare.plan(model="tiny-sdar", suite="sudoku", overrides=["remasking=low_confidence_dynamic", "threshold=0.9"],
                     limit=1, out=tmp_path)
    record = build_record(plan, tmp_path / "run", "complete", datetime.now(timezone.utc), {}, plan.model_info(),
                          {}, {}, {}, {})
    assert record.decoder.rules == {"threshold": THRESHOLD_QUOTA}
    assert record.backend.rules == {}
