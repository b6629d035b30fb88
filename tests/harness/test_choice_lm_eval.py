"""DARE's choice requests equal the ones lm-eval's own code builds from the same documents.

tests/harness/fixtures/lm_eval_choice_contexts.json holds, for the first questions of ARC-Challenge (3-shot from
train), MMLU abstract algebra (5-shot, first n of dev, the subject's description), WinoGrande (5-shot from train_l,
partial scoring, lm-eval's extra draw), PIQA (0-shot), TruthfulQA-MC2 (the QA primer) and HellaSwag (0-shot), the
(context, continuation) pairs lm_eval 0.4.8 builds (benchmarks/lm_eval_choice_contexts.py ran its
ConfigurableTask; provenance in the file), its mc2 values for made-up log-likelihoods, and a digest of every
HellaSwag row as its ``process_docs`` makes it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from dare.harness import config as cfg
from dare.harness.choice import build_items, verdict
from dare.harness.data import file_sha256, load_rows, manifest
from dare.harness.generators import choice_sources

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "lm_eval_choice_contexts.json").read_text())


def items_of(name: str):
    case = FIXTURE["cases"][name]
    spec = cfg.benchmark(name)
    every = load_rows(spec.data)
    rows = [every[i] for i in case["rows"]] if "rows" in case else every[: len(case["requests"])]
    pool = load_rows(spec.choice.fewshot) if spec.choice.fewshot else ()
    return case, build_items(spec, rows, pool, case["num_fewshot"])


@pytest.mark.parametrize("name", sorted(FIXTURE["cases"]))
def test_requests_equal_lm_evals(name):
    case, items = items_of(name)
    assert [[[c, k] for c, k in zip(it.contexts, it.continuations)] for it in items] == case["requests"]


def test_mc2_equals_lm_evals():
    """lm-eval's process_results_mc2 on made-up log-likelihoods (-0.1 per continuation character), row 25 (a true
    answer listed after a false one, which lm-eval counts as false) included."""
    case, items = items_of("truthfulqa_mc2")
    got = [verdict(it, [-0.1 * len(c) for c in it.continuations]).details["mc2"] for it in items]
    assert got == pytest.approx(case["mc2"], rel=1e-12)


def test_every_hellaswag_row_is_lm_evals():
    """All 10042 rows' query, choices and gold equal lm-eval's ``process_docs`` output (its preprocess strips
    WikiHow's bracketed markers: a wrong rule changes thousands of rows, one changed row changes the digest)."""
    rows = load_rows("hellaswag_validation.jsonl")
    digest = hashlib.sha256(json.dumps([[r["query"], r["choices"], r["gold"]] for r in rows]).encode()).hexdigest()
    assert digest == FIXTURE["cases"]["hellaswag"]["rows_sha256"]


def test_shipped_sizes_are_the_official_ones():
    """ARC-Challenge test 1172 / train 1119, MMLU test 14042 / dev 285 (57 subjects), PIQA validation 1838,
    WinoGrande 1.1 dev 1267 / train_l 10234, TruthfulQA 817, HellaSwag validation 10042; every gold inside its
    choices."""
    sizes = {"arc_challenge_test.jsonl": 1172, "arc_challenge_train.jsonl": 1119, "mmlu_test.jsonl": 14042,
             "mmlu_dev.jsonl": 285, "piqa_validation.jsonl": 1838, "winogrande_validation.jsonl": 1267,
             "winogrande_train_l.jsonl": 10234, "truthfulqa_mc2_validation.jsonl": 817,
             "hellaswag_validation.jsonl": 10042}
    for name, n in sizes.items():
        rows = load_rows(name)
        assert len(rows) == n, name
        golds = [(r["gold"] if isinstance(r["gold"], list) else [r["gold"]], r.get("choices") or r["contexts"])
                 for r in rows]
        assert all(g and all(0 <= i < len(c) for i in g) for g, c in golds), name
    assert len({r["subject"] for r in load_rows("mmlu_test.jsonl")}) == 57


@pytest.mark.skipif(not os.environ.get("DARE_CHOICE_SOURCES"),
                    reason="set DARE_CHOICE_SOURCES to the source copies (harness/data/README.md) to rebuild the files")
def test_converter_rebuilds_the_shipped_files(tmp_path):
    for path in choice_sources.write(Path(os.environ["DARE_CHOICE_SOURCES"]), tmp_path):
        assert file_sha256(path) == manifest()[path.name], path.name
