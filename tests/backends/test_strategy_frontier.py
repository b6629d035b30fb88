"""benchmarks/decode_frontier.py end to end at toy size: every strategy of the family, one record each."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "decode_frontier.py"


def _run(monkeypatch, args):
    monkeypatch.setattr(sys, "argv", ["decode_frontier.py", *args])
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    finally:
        torch.set_num_threads(threads)


def test_masked_family_lists_rules_and_caches(monkeypatch, tmp_path):
    out = tmp_path / "f.json"
    _run(monkeypatch, ["--model", "tiny-llada", "--suite", "sudoku", "--json", str(out), "--limit", "2",
                       "--gen-length", "16", "--block-length", "16", "--batch", "2", "--out", str(tmp_path / "runs"),
                       "--only", "mdm:low_confidence", "mdm:klass", "mdm:pc_sampler", "mdm:dpad",
                       "fastdllm:dual_threshold", "fastdllm:dkv"])
    report = json.loads(out.read_text())
    rows = report["strategies"]
    assert set(rows) == {"mdm:low_confidence", "mdm:klass", "mdm:pc_sampler", "mdm:dpad", "fastdllm:dual_threshold",
                         "fastdllm:dkv"}
    assert rows["mdm:low_confidence"]["speedup"] == 1.0 and rows["mdm:low_confidence"]["nfe_per_token"] == 1.0
    for label, row in rows.items():
        record = json.loads((Path(row["run_dir"]) / "run.json").read_text())
        assert record["decoder"]["name"].endswith(label.split(":", 1)[1] if label.startswith("mdm")
                                                  else "low_confidence")
        assert row["n"] == 2 and row["tokens_per_s"] > 0 and 0 <= row["ci"][0] <= row["accuracy"] <= row["ci"][1]


def test_block_family(monkeypatch, tmp_path):
    out = tmp_path / "f.json"
    _run(monkeypatch, ["--model", "tiny-sdar", "--suite", "sudoku", "--json", str(out), "--limit", "2",
                       "--gen-length", "32", "--block-length", "4", "--batch", "2", "--out", str(tmp_path / "runs")])
    rows = json.loads(out.read_text())["strategies"]
    assert "block:low_confidence" in rows and len(rows) >= 4
    assert not any(label.startswith("fastdllm:") for label in rows)  # no KV cache serves the block family
    assert rows["block:low_confidence"]["accuracy"] > 0  # the trained tiny-sdar solves Sudoku (32-token answers)


def test_caches_come_from_the_registry():
    from dare.backends import decoding  # noqa: F401  (registers the decoders and caches)

    strategies = runpy.run_path(str(SCRIPT))["strategies"]
    mdm, dream = strategies("mdm"), strategies("dream")
    assert {"fastdllm:prefix", "fastdllm:dual", "fastdllm:dkv", "fastdllm:dual_threshold"} <= set(mdm)
    assert mdm["fastdllm:dkv"] == ("fastdllm", ["remasking=low_confidence", "cache=dkv"])
    assert dream["fastdllm:dkv"] == ("fastdllm", ["remasking=maskgit_plus", "cache=dkv"])
    assert not any(label.startswith("fastdllm:") for label in strategies("block"))  # no cache serves SDAR / LLaDA2
