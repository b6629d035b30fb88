"""Through the CLI: a completions file mixing correct solutions, wrong ones and attacks is graded
exactly as expected by `dare-eval --backend replay --suite humaneval`, and the host is left alone."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from dare.harness.data import load_samples

from ..helpers import dare_eval, run_record, write_completions
from .attacks import render

ATTACKS = ["eq_spoof_object", "os_exit_before_tests", "sys_exit_before_tests", "frame_walk_forge_channel",
           "fake_pass_markers", "monkeypatch_builtins_and_json", "read_parent_secret", "write_outside_workdir",
           "network_connect", "infinite_loop"]


def test_replay_file_with_solutions_wrong_answers_and_attacks(tmp_path):
    samples = load_samples("humaneval.jsonl")[:2]
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched")
    secret_name, secret = "DARE_REPLAY_SECRET", secrets.token_hex(8)
    attacks = [render(a, str(canary), secret_name, str(tmp_path / "cache")) for a in ATTACKS]
    wrong = "    return None\n"
    k = 2 + len(attacks)
    first = [samples[0].reference, wrong, *attacks]  # index 0 correct, everything else must fail
    second = [wrong] * (k - 1) + [samples[1].reference]  # only the last one is correct
    rows = [(samples[0].id, c) for c in first] + [(samples[1].id, c) for c in second]
    path = write_completions(tmp_path / "mixed.jsonl", rows)

    proc = dare_eval("--backend", "replay", "--suite", "humaneval", "--limit", "2", "--completions", str(path),
                     "--out", str(tmp_path / "runs"), "--set", f"verifier.cache_dir={tmp_path / 'cache'}",
                     env={secret_name: secret})
    run_dir, record = run_record(proc)
    graded = {(r["id"], r["index"]): r for r in map(json.loads, (run_dir / "samples.jsonl").read_text().splitlines())}
    expected = {(samples[0].id, 0): True, (samples[1].id, k - 1): True}
    for key, row in graded.items():
        assert row["passed"] is expected.get(key, False), (key, row["details"])
        assert row["status"] == "scored", (key, row["details"])
    assert len(graded) == 2 * k
    metrics = record["metrics"]["humaneval"]
    assert metrics["pass@1"]["value"] == pytest.approx(1 / k) and metrics[f"pass@{k}"]["value"] == 1.0
    assert record["isolation"]["humaneval"], "the run record names the isolation layers"
    assert canary.read_text() == "untouched" and secret not in (run_dir / "samples.jsonl").read_text()
    assert os.environ.get(secret_name) is None and Path(tmp_path / "canary.txt").exists()
