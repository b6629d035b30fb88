"""lm-eval's ``loglikelihood`` through the ``dare`` model: a local multiple-choice task over DARE's sudoku_choice
rows on tiny-sdar, each choice's log-likelihood the engine's own estimate (block_elbo, exact mode: every masked
subset of each block of 4, so no draw is involved and lm-eval's request seeds and dare-eval's cannot differ) of
the very strings lm-eval sent; the run record it leaves is dare-eval's on the same data and estimator."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("lm_eval")

import dare  # noqa: E402
from dare.backends.harnesses import lm_eval_cli  # noqa: E402
from dare.harness.likelihood import LikelihoodRequest  # noqa: E402
from dare.leaderboards.build import build_site  # noqa: E402

from .conftest import read_run  # noqa: E402
from .sudoku_choice_task import TASK, write_task  # noqa: E402

LIMIT = 6
ESTIMATOR = {"likelihood.mode": "exact"}


@pytest.fixture(scope="module")
def lm_eval_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("choice")
    write_task(root)
    args = ",".join(["model=tiny-sdar", f"out={root / 'runs'}", *(f"{k}={v}" for k, v in ESTIMATOR.items())])
    code = lm_eval_cli.main(["run", "--model", "dare", "--model_args", args, "--tasks", TASK,
                             "--include_path", str(root), "--limit", str(LIMIT), "--output_path", str(root / "out")])
    assert code == 0
    [path] = list((root / "out").rglob(f"samples_{TASK}_*.jsonl"))
    [results] = list((root / "out").rglob("results_*.json"))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return rows, json.loads(results.read_text(encoding="utf-8")), root


@pytest.fixture(scope="module")
def native_choice(tmp_path_factory):
    """(record, rows) of ``dare-eval --model tiny-sdar --suite sudoku_choice --limit 6 --set likelihood.mode=exact``."""
    plan = dare.plan(model="tiny-sdar", suite="sudoku_choice", limit=LIMIT,
                     overrides=[f"{k}={v}" for k, v in ESTIMATOR.items()], out=tmp_path_factory.mktemp("native"))
    dare.evaluate(plan)
    return read_run(plan.run_dir)


def test_each_choice_scores_the_engine_s_own_estimate(lm_eval_run, tmp_path):
    rows, results, _ = lm_eval_run
    engine = dare.plan(model="tiny-sdar", suite="sudoku", limit=1, out=tmp_path).engine
    estimator = engine.likelihood_estimator("block_elbo", {"mode": "exact"})
    pairs = [(args["arg_0"], args["arg_1"]) for row in rows for args in row["arguments"].values()]
    want = engine.loglikelihood([LikelihoodRequest(str(i), c, x, 0) for i, (c, x) in enumerate(pairs)], estimator)
    got = [float(resp[0][0]) for row in rows for resp in row["resps"]]
    assert len(got) == 4 * LIMIT and got == [r.logprob for r in want]
    assert pairs[0][0].endswith("Solve the following Sudoku puzzle: 3102200002100320\n")  # the row's query
    assert pairs[0][1] == " <answer>\n3142243142131323\n</answer>"  # a space, then the choice
    chosen = [max(range(4), key=lambda i, row=row: float(row["resps"][i][0][0])) for row in rows]
    assert results["results"][TASK]["acc,none"] == sum(c == int(r["target"]) for c, r in zip(chosen, rows)) / LIMIT


def test_the_run_record_is_dare_eval_s_on_the_same_data_and_estimator(lm_eval_run, native_choice):
    [run_dir] = list((lm_eval_run[2] / "runs").iterdir())
    record, rows = read_run(run_dir)
    native, native_rows = native_choice
    info, native_info = record.benchmarks[TASK], native.benchmarks["sudoku_choice"]
    assert info.estimator == native_info.estimator and info.estimator.options["mode"] == "exact"
    assert info.fewshot["num_fewshot"] == 0 and info.verifier == "lm-eval" and "lm-eval" in record.flags
    for metric in ("acc", "acc_norm"):
        assert record.metrics[TASK][metric].value == native.metrics["sudoku_choice"][metric].value
        assert record.metrics[TASK][metric].n == LIMIT
    assert [r["logprobs"] for r in rows] == [r["logprobs"] for r in native_rows]
    assert [r["continuations"] for r in rows] == [r["continuations"] for r in native_rows]
    assert [r["answer"] for r in rows] == [r["answer"] for r in native_rows]
    assert record.model.fingerprint == native.model.fingerprint


def test_the_leaderboard_keys_its_column_by_the_estimator(lm_eval_run, tmp_path):
    root = lm_eval_run[2]
    report = build_site([root / "runs"], tmp_path / "site")
    assert report.suites == {TASK: 1} and not report.skipped
    board = json.loads((tmp_path / "site" / "leaderboard.json").read_text(encoding="utf-8"))
    [column] = board["suites"][0]["columns"]
    assert column["estimator"] == "block_elbo v1 block_length=None max_length=4096 mc_num=128 mode=exact"
    assert column["id"] == f"{TASK}#{column['estimator']}"


def test_a_monte_carlo_estimate_draws_what_dare_eval_draws_for_the_same_question(tmp_path):
    """tiny-llada's llada_mc (4 masked copies): each request is seeded by its row's id and choice, as dare-eval
    seeds it, so the two harnesses' estimates of a question agree to the bit (task/doc seeds would not)."""
    write_task(tmp_path)
    mc = {"likelihood.mc_num": 4, "likelihood.batch": 4}
    args = ",".join(["model=tiny-llada", f"out={tmp_path / 'runs'}", *(f"{k}={v}" for k, v in mc.items())])
    assert lm_eval_cli.main(["run", "--model", "dare", "--model_args", args, "--tasks", TASK, "--include_path",
                             str(tmp_path), "--limit", "2", "--output_path", str(tmp_path / "out")]) == 0
    [run_dir] = list((tmp_path / "runs").iterdir())
    plan = dare.plan(model="tiny-llada", suite="sudoku_choice", limit=2, out=tmp_path / "native",
                     overrides=[f"{k}={v}" for k, v in mc.items()])
    dare.evaluate(plan)
    ours, native = read_run(run_dir)[1], read_run(plan.run_dir)[1]
    assert [r["logprobs"] for r in ours] == [r["logprobs"] for r in native]
    assert len({lp for r in ours for lp in r["logprobs"]}) == 8  # real estimates, none repeated


def _instances(kind, texts):
    from lm_eval.api.instance import Instance

    return [Instance(request_type=kind, doc={}, arguments=(t,), idx=0, metadata=("t", i, 1))
            for i, t in enumerate(texts)]


def test_a_rolling_request_is_the_whole_text_s_estimate(tmp_path):
    from dare.backends.harnesses.lm_eval_model import DareLM

    lm = DareLM(model="tiny-sdar", **{"likelihood.mode": "exact", "out": str(tmp_path)})
    text = "Sudoku 3102200002100320 solved: 3142243142131324"
    [got] = lm.loglikelihood_rolling(_instances("loglikelihood_rolling", [text]))
    engine = lm.session.engine
    [want] = engine.loglikelihood_rolling([LikelihoodRequest("x", "", text, 0)],
                                          engine.likelihood_estimator("block_elbo", {"mode": "exact"}))
    assert got == want.logprob < 0


def test_a_family_without_a_whole_text_estimate_refuses_in_one_line(tmp_path):
    from dare.backends.harnesses.lm_eval_model import DareLM
    from dare.harness.errors import ConfigError

    lm = DareLM(model="tiny-dream", **{"out": str(tmp_path)})
    with pytest.raises(ConfigError, match="has no whole-text estimate") as err:
        lm.loglikelihood_rolling(_instances("loglikelihood_rolling", ["some text"]))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("batch_size, model_args, warned", [
    ("8", {"likelihood.mc_num": 32}, True), ("8", {"likelihood.mc_num": 8, "likelihood.batch": 8}, False),
    ("1", {"likelihood.mc_num": 32}, False)])
def test_lm_eval_s_batch_size_is_said_not_to_be_the_monte_carlo_batch(batch_size, model_args, warned, tmp_path,
                                                                      caplog):
    """LLaDA's recipe passes ``--batch_size 8`` meaning its Monte-Carlo batch (ML-GSAI/LLaDA@b7e6c35
    eval_llada_lm_eval.sh); DARE's is likelihood.batch (32 unless set), which the warning names, once. lm-eval
    passes 1 when no --batch_size is given: no warning then."""
    from lm_eval.api.instance import Instance

    from dare.backends.harnesses.lm_eval_model import DareLM

    lm = DareLM(batch_size=batch_size, model="tiny-llada", out=str(tmp_path), **model_args)
    request = Instance("loglikelihood", {"id": "q"}, ("3 + 4 =", " 7"), 0, ("t", 0, 1))
    with caplog.at_level("WARNING", logger="dare.backends.harnesses.lm_eval_model"):
        lm.loglikelihood([request])
        lm.loglikelihood([request])
    said = [r.getMessage() for r in caplog.records if "--batch_size" in r.getMessage()]
    assert said == (["dare: lm-eval's --batch_size 8 is DARE's execution batch (no value depends on it); the "
                     "Monte-Carlo batch is likelihood.batch=32 (set likelihood.batch=8 for LLaDA's meaning)"]
                    if warned else [])
