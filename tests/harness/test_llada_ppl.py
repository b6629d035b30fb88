"""The llada-ppl suite resolves LLaDA's published recipe per task from shipped metadata, with --dry-run.

Recipe (ML-GSAI/LLaDA@b7e6c35 eval_llada_lm_eval.sh, LLaDA-8B-Base): mc_num 128 in batches of 8; ARC-Challenge,
HellaSwag and PIQA 0-shot CFG 0.5; WinoGrande 5-shot CFG 0; TruthfulQA-MC2 0-shot CFG 2.0; MMLU 5-shot CFG 0 with
mc_num 1, batch 1.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from dare.harness.cli import main

HUB = Path(os.environ.get("DARE_HUB_CONFIGS") or Path(__file__).resolve().parents[3] / "shared" / "hub_configs")
pytestmark = pytest.mark.skipif(not HUB.is_dir(), reason="hub checkpoint metadata not available here")
RECIPE = {"arc_challenge": (0, 128, 8, 0.5), "hellaswag": (0, 128, 8, 0.5), "piqa": (0, 128, 8, 0.5),
          "winogrande": (5, 128, 8, 0.0), "truthfulqa_mc2": (0, 128, 8, 2.0), "mmlu": (5, 1, 1, 0.0)}


def dry_run(capsys, tmp_path, *sets: str) -> dict[str, tuple]:
    """benchmark -> (shots, mc_num, batch, cfg) as --dry-run prints them (the LLaDA-8B config stands in for the
    Base checkpoint: the same architecture)."""
    args = ["--model", "llada-8b-base", "--model-path", str(HUB / "LLaDA-8B-Instruct"), "--suite", "llada-ppl",
            "--dry-run", "--out", str(tmp_path)]
    assert main(args + [a for s in sets for a in ("--set", s)]) == 0
    out = capsys.readouterr().out
    shots = dict(re.findall(r"^(\w+): choice (\d+)-shot", out, re.M))
    options = {name: json.loads(raw) for name, raw in re.findall(r"^(\w+): estimator llada_mc 1 options (.*)$", out,
                                                                  re.M)}
    return {n: (int(shots[n]), o["mc_num"], o["batch"], o["cfg"]) for n, o in options.items()}


def test_the_recipe_per_task(capsys, tmp_path):
    assert dry_run(capsys, tmp_path) == RECIPE


def test_set_overrides_every_task(capsys, tmp_path):
    got = dry_run(capsys, tmp_path, "likelihood.mc_num=64", "choice.num_fewshot=0")
    assert got == {n: (0, 64, batch, cfg) for n, (_, _, batch, cfg) in RECIPE.items()}
