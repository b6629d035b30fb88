"""lm-eval's ``loglikelihood`` through the ``dare`` model: a local multiple-choice task over Sudoku puzzles on
tiny-sdar, each choice's log-likelihood the engine's own estimate (block_elbo, exact mode: every masked subset of
each block of 4, so no draw is involved) of the very strings lm-eval sent."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("lm_eval")

import dare  # noqa: E402
from dare.backends.harnesses import lm_eval_cli  # noqa: E402
from dare.harness.likelihood import LikelihoodRequest  # noqa: E402

from .sudoku_choice_task import TASK, write_task  # noqa: E402

LIMIT = 6


@pytest.fixture(scope="module")
def lm_eval_samples(tmp_path_factory):
    root = tmp_path_factory.mktemp("choice")
    write_task(root)
    code = lm_eval_cli.main(["run", "--model", "dare", "--model_args",
                             f"model=tiny-sdar,likelihood.mode=exact,out={root / 'runs'}", "--tasks", TASK,
                             "--include_path", str(root), "--limit", str(LIMIT), "--output_path", str(root / "out")])
    assert code == 0
    [path] = list((root / "out").rglob(f"samples_{TASK}_*.jsonl"))
    [results] = list((root / "out").rglob("results_*.json"))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return rows, json.loads(results.read_text(encoding="utf-8")), root


def test_each_choice_scores_the_engine_s_own_estimate(lm_eval_samples, tmp_path):
    rows, results, _ = lm_eval_samples
    engine = dare.plan(model="tiny-sdar", suite="sudoku", limit=1, out=tmp_path).engine
    estimator = engine.likelihood_estimator("block_elbo", {"mode": "exact"})
    pairs = [(args["arg_0"], args["arg_1"]) for row in rows for args in row["arguments"].values()]
    want = engine.loglikelihood([LikelihoodRequest(str(i), c, x, 0) for i, (c, x) in enumerate(pairs)], estimator)
    got = [float(resp[0][0]) for row in rows for resp in row["resps"]]
    assert len(got) == 2 * LIMIT and got == [r.logprob for r in want]
    assert pairs[0] == ("Sudoku 3102200002100320 solved:", " 3142243142131324")  # context, then continuation
    chosen = [max(range(2), key=lambda i, row=row: float(row["resps"][i][0][0])) for row in rows]
    assert results["results"][TASK]["acc,none"] == sum(c == 0 for c in chosen) / LIMIT


def test_a_likelihood_task_leaves_no_decoding_record(lm_eval_samples):
    assert not (lm_eval_samples[2] / "runs").exists()  # run.json records decodings, not scoring estimators


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
