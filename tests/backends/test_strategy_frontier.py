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
                       "--only", "mdm:low_confidence", "mdm:klass", "mdm:pc_sampler", "mdm:dpad", "fastdllm:dual_threshold"])
    report = json.loads(out.read_text())
    rows = report["strategies"]
    assert set(rows) == {"mdm:low_confidence", "mdm:klass", "mdm:pc_sampler", "mdm:dpad", "fastdllm:dual_threshold"}
    assert rows["mdm:low_confidence"]["speedup"] == 1.0 and rows["mdm:low_confidence"]["nfe_per_token"] == 1.0
    for label, row in rows.items():
        record = json.loads((Path(row["run_dir"]) / "run.json").read_text())
        assert record["decoder"]["name"].endswith(label.split(":", 1)[1] if label.startswith("mdm") else "low_confidence")
        assert row["n"] == 2 and row["tokens_per_s"] > 0 and 0 <= row["ci"][0] <= row["accuracy"] <= row["ci"][1]


def test_block_family(monkeypatch, tmp_path):
    out = tmp_path / "f.json"
    _run(monkeypatch, ["--model", "tiny-sdar", "--suite", "sudoku", "--json", str(out), "--limit", "2",
                       "--gen-length", "32", "--block-length", "4", "--batch", "2", "--out", str(tmp_path / "runs")])
    rows = json.loads(out.read_text())["strategies"]
    assert "block:low_confidence" in rows and "fastdllm:dual" not in rows and len(rows) >= 4
    assert rows["block:low_confidence"]["accuracy"] > 0  # the trained tiny-sdar solves Sudoku (32-token answers)
