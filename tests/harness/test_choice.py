"""Likelihood-scored multiple choice: contexts as lm-eval builds them, lm-eval's verdicts, the run loop.

Reference: lm_eval 0.4.8 (``api/task.py: ConfigurableTask.fewshot_context, construct_requests,
process_results``; ``api/samplers.py: ContextSampler.get_context``; ``tasks/truthfulqa/utils.py:
process_results_mc2``). The engine is tests/harness/char_lm.py: log p = -len(continuation) ln 2, so every
number below is worked by hand.
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

import dare
from dare.harness import config as hcfg
from dare.harness import data
from dare.harness.choice import build_items, verdict
from dare.harness.config import BenchmarkSpec, ChoiceSpec
from dare.harness.errors import ConfigError, DataError
from dare.harness.registry import engines, likelihoods

sys.path.insert(0, str(Path(__file__).parent))
import char_lm  # noqa: E402


@pytest.fixture
def char_engine():
    saved = engines.snapshot(), likelihoods.snapshot()
    char_lm.register()
    char_lm.CharLM.batches = 0
    yield
    engines.restore(saved[0])
    likelihoods.restore(saved[1])


def bench(**choice) -> BenchmarkSpec:
    return BenchmarkSpec(name="t", version="1", dataset_version="t", family="x", task="choice", data="t.jsonl",
                         choice=ChoiceSpec(fewshot="train.jsonl", **choice), metrics=["acc"])


POOL = [{"id": f"p{i}", "query": f"Q{i}?", "choices": [f"a{i}", f"b{i}"], "gold": i % 2} for i in range(6)]
ROWS = [{"id": "e0", "query": "E0?", "choices": ["x", "y"], "gold": 0},
        {"id": "e1", "query": "E1?", "choices": ["x", "y"], "gold": 1}]


def test_fewshot_draws_follow_one_seeded_sampler_in_question_order():
    """lm-eval: one random.Random(1234) per task, sample(docs, n) per question in order; each example is
    text + target_delimiter + gold choice + fewshot_delimiter, after the description."""
    items = build_items(bench(description="About things.\n\n"), ROWS, POOL, 2)
    rnd = random.Random(1234)
    for row, item in zip(ROWS, items):
        shots = rnd.sample(POOL, 2)
        expected = "About things.\n\n" + "".join(f"{s['query']} {s['choices'][s['gold']]}\n\n" for s in shots)
        assert item.contexts == (expected + row["query"],) * 2
        assert item.continuations == (" x", " y")
    assert items[0].contexts[0] != items[1].contexts[0]  # the second question got the sampler's next draw
    # --limit keeps a question's examples: the first question alone draws the same
    assert build_items(bench(description="About things.\n\n"), ROWS[:1], POOL, 2)[0] == items[0]


def test_same_split_draws_one_more_and_drops_the_question():
    rows = POOL[:3]
    spec = BenchmarkSpec(**{**bench().model_dump(), "choice": ChoiceSpec(fewshot="t.jsonl")})
    items = build_items(spec, rows, rows, 2)
    rnd = random.Random(1234)
    for row, item in zip(rows, items):
        shots = [s for s in rnd.sample(rows, 3) if s is not row][:2]
        assert item.contexts[0] == "".join(f"{s['query']} {s['choices'][s['gold']]}\n\n" for s in shots) + row["query"]


def test_first_n_per_group_with_row_description():
    """MMLU: each subject is its own task (description from the row, the first n dev rows of the subject)."""
    pool = [{"id": f"d{i}", "subject": "bio" if i % 2 else "law", "query": f"D{i}", "choices": ["A", "B"],
             "gold": 1} for i in range(6)]
    row = {"id": "t0", "subject": "bio", "query": "T0", "choices": ["A", "B"], "gold": 0}
    item = build_items(bench(sampler="first_n", group="subject", description="About {subject}.\n\n"),
                       [row], pool, 2)[0]
    assert item.contexts[0] == "About bio.\n\nD1 B\n\nD3 B\n\nT0"


def test_partial_scoring_varies_the_context_and_shares_the_continuation():
    """WinoGrande (lm-eval multiple_input): context + option, then ' ' + the rest of the sentence."""
    row = {"id": "w", "contexts": ["The cup fell on Ann", "The cup fell on Bob"], "continuation": "who cried.",
           "gold": 1}
    shot = {"id": "s", "contexts": ["A", "B"], "continuation": "ends.", "gold": 0}
    item = build_items(bench(), [row], [shot], 1)[0]
    assert item.contexts == ("A ends.\n\nThe cup fell on Ann", "A ends.\n\nThe cup fell on Bob")
    assert item.continuations == (" who cried.",) * 2
    assert item.lengths == (len("The cup fell on Ann"), len("The cup fell on Bob"))


def test_acc_norm_divides_by_the_choice_characters_without_the_delimiter():
    """Choices 'ab', 'a', 'abcd' under log p = -len(' ' + choice) ln 2: acc picks 'a' (1); per character of
    the choice, -(n+1)/n ln 2 is largest for 'abcd' (2). Dividing by the continuation (with its space) ties all
    three and argmax would pick 0."""
    item = build_items(bench(), [{"id": "q", "query": "Q", "choices": ["ab", "a", "abcd"], "gold": 2}], [], 0)[0]
    v = verdict(item, [-len(c) * math.log(2) for c in item.continuations])
    assert (v.details["pred"], v.details["pred_norm"]) == (1, 2)
    assert (v.details["acc"], v.details["acc_norm"]) == (0.0, 1.0)


def test_mc2_is_the_true_answers_share_of_the_probability_mass():
    """p = 0.2, 0.1 (true), 0.3, 0.4 (false): mc2 = 0.3 / 1.0 (lm-eval's process_results_mc2)."""
    item = build_items(bench(), [{"id": "q", "query": "Q", "choices": ["t1", "t2", "f1", "f2"], "gold": [0, 1]}],
                       [], 0)[0]
    v = verdict(item, [math.log(p) - 700 for p in (0.2, 0.1, 0.3, 0.4)])  # far below exp's range: still exact
    assert v.details["mc2"] == pytest.approx(0.3)
    assert v.details["acc"] == 0.0  # argmax (0.4) is false


def test_gold_out_of_range_is_one_line():
    with pytest.raises(DataError, match=r"row 'q' has gold 3 outside its 2 choices.*gold indexes choices 0\.\.1$"):
        build_items(bench(), [{"id": "q", "query": "Q", "choices": ["a", "b"], "gold": 3}], [], 0)


def test_gold_out_of_range_exits_2(tmp_path, monkeypatch, capsys, char_engine):
    from dare.harness.cli import main

    monkeypatch.setattr(data, "DATA_DIR", tmp_path)
    rows = tmp_path / "bad.jsonl"
    rows.write_text(json.dumps({"id": "q", "query": "Q", "choices": ["a", "b"], "gold": 2}) + "\n")
    (tmp_path / "MANIFEST.sha256").write_text(f"{data.file_sha256(rows)}  bad.jsonl\n")
    (tmp_path / "configs" / "benchmarks").mkdir(parents=True)
    (tmp_path / "configs" / "benchmarks" / "bad_choice.yaml").write_text(
        "name: bad_choice\nversion: '1'\ndataset_version: t\nfamily: x\ntask: choice\ndata: bad.jsonl\nchoice: {}\n"
        "metrics: [acc]\n")
    monkeypatch.setenv("DARE_CONFIG_PATH", str(tmp_path / "configs"))
    for fn in (data.manifest, data.verified_path, data.load_rows, hcfg.catalog, hcfg.benchmark, hcfg.suite):
        fn.cache_clear()
    try:
        code = main(["--backend", "char-lm", "--suite", "bad_choice", "--out", str(tmp_path / "runs")])
    finally:
        for fn in (data.manifest, data.verified_path, data.load_rows, hcfg.catalog, hcfg.benchmark, hcfg.suite):
            fn.cache_clear()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "has gold 2 outside its 2 choices" in err[0]


def run(tmp_path, *sets: str, limit: int = 6, batch: int = 4):
    p = dare.plan(model="c", suite="sudoku_choice", engine="char-lm", limit=limit, out=tmp_path / "runs",
                  overrides=[f"batch_size={batch}", *sets])
    return p, dare.evaluate(p)


def test_run_records_every_choice_and_the_estimator(tmp_path, char_engine):
    p, record = run(tmp_path, "likelihood.estimator=noisy", "likelihood.mc_num=4")
    info = record.benchmarks["sudoku_choice"]
    assert info.estimator.name == "noisy" and info.estimator.options["mc_num"] == 4
    assert info.fewshot["num_fewshot"] == 0 and info.fewshot["seed"] == 1234
    rows = [json.loads(line) for line in (p.run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(len(r["logprobs"]) == 4 and r["stderrs"] == [0.5] * 4 for r in rows)
    acc = [r["details"]["acc"] for r in rows]
    assert record.metrics["sudoku_choice"]["acc"].value == pytest.approx(sum(acc) / 6)
    assert record.metrics["sudoku_choice"]["acc"].n == 6


def test_estimator_options_key_the_cache(tmp_path, char_engine):
    """mc_num 1 vs 4 and cfg 0 vs 0.5 never share scores; the same settings again are all cached."""
    counts = []
    for sets in (["likelihood.mc_num=1"], ["likelihood.mc_num=4"], ["likelihood.cfg=0.5"], ["likelihood.mc_num=1"]):
        _, record = run(tmp_path, "likelihood.estimator=noisy", *sets)
        counts.append((record.counts["sudoku_choice"]["generated"], record.counts["sudoku_choice"]["cached"]))
    assert counts == [(24, 0), (24, 0), (24, 0), (0, 24)]


def test_killed_run_resumes_from_the_cache(tmp_path, char_engine):
    """Stopped after two batches of 4 scores: the rerun scores only the rest and ends as an uninterrupted run."""
    with pytest.raises(char_lm.Interrupted):
        run(tmp_path, "likelihood.estimator=noisy", "likelihood.fail_after=2")
    partial = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    assert partial["status"] == "partial" and partial["metrics"]["sudoku_choice"]["acc"]["n"] == 2
    _, resumed = run(tmp_path, "likelihood.estimator=noisy")
    assert (resumed.counts["sudoku_choice"]["cached"], resumed.counts["sudoku_choice"]["generated"]) == (8, 16)
    _, fresh = run(tmp_path / "fresh", "likelihood.estimator=noisy")
    assert resumed.metrics == fresh.metrics


def test_an_engine_without_likelihood_is_refused(tmp_path):
    (tmp_path / "x.jsonl").write_text(json.dumps({"id": "sudoku_choice/test/0", "completion": "x"}) + "\n")
    with pytest.raises(ConfigError, match="engine replay does not score likelihood"):
        dare.plan(model="c", suite="sudoku_choice", engine="replay", completions=tmp_path / "x.jsonl",
                  out=tmp_path / "runs")


def test_unknown_estimator_option_is_one_line(tmp_path, char_engine):
    with pytest.raises(ConfigError, match="likelihood.mc_nm: unknown option; did you mean 'mc_num'"):
        run(tmp_path, "likelihood.estimator=noisy", "likelihood.mc_nm=2")


def test_likelihood_settings_on_a_suite_without_choice_benchmarks_are_refused(tmp_path, char_engine):
    with pytest.raises(ConfigError, match="suite sudoku has no likelihood-scored benchmark"):
        dare.plan(model="c", suite="sudoku", engine="char-lm", out=tmp_path, overrides=["likelihood.mc_num=2"])
