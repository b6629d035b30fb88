"""OpenCompass's likelihood calls on DareModel: ``get_ppl`` (PPLInferencer's datasets) and ``get_loglikelihood``
are the engine's own scoring estimates (backends/opencompass/scoring.py), and a PPL dataset runs through
OpenCompass's own inference and evaluation tasks. tiny-sdar with block_elbo in exact mode (every masked subset
of each block of 4: no draw), so every number is checked exactly against the engine called directly."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opencompass")

from mmengine.config import ConfigDict  # noqa: E402

from dare.backends.opencompass.configs import dare_model  # noqa: E402
from dare.backends.opencompass.model import DareModel  # noqa: E402
from dare.harness.data import load_rows  # noqa: E402
from dare.harness.errors import ConfigError  # noqa: E402
from dare.harness.likelihood import LikelihoodRequest  # noqa: E402

EXACT = {"mode": "exact"}
PUZZLES = load_rows("sudoku_test.jsonl")[:4]


@pytest.fixture(scope="module")
def model():
    return DareModel(engine="torch", model="tiny-sdar", likelihood_options=EXACT)


def _direct(model, context, continuation, rolling=False):
    info = model.engine.likelihood_estimator("block_elbo", EXACT)
    score = model.engine.loglikelihood_rolling if rolling else model.engine.loglikelihood
    [result] = score([LikelihoodRequest("x", context, continuation, 0)], info)
    return result


def test_get_ppl_is_nats_per_token_of_the_whole_text_estimate(model):
    texts = [f"Sudoku {row['puzzle']} solved: {row['solution']}" for row in PUZZLES[:2]]
    got = model.get_ppl(texts).tolist()
    for text, ppl in zip(texts, got):
        want = _direct(model, "", text, rolling=True)
        assert ppl == -want.logprob / want.tokens and ppl > 0
    assert got[0] != got[1]


def test_get_loglikelihood_scores_the_continuation_given_the_rest(model):
    row = PUZZLES[0]
    context, cont = f"Sudoku {row['puzzle']} solved:", f" {row['solution']}"
    [got] = model.get_loglikelihood([context + cont], [cont]).tolist()
    assert got == _direct(model, context, cont).logprob
    assert got != _direct(model, "", context + cont, rolling=True).logprob  # not the whole text's


def test_mask_length_and_a_misspelt_estimator_option_are_one_line_refusals(model):
    with pytest.raises(ConfigError, match="mask_length"):
        model.get_ppl(["a text"], mask_length=[1])
    with pytest.raises(ConfigError, match="unknown option; did you mean 'mode'"):
        dare_model("torch", "tiny-sdar", likelihood_options={"mod": "exact"})


def test_a_ppl_dataset_runs_through_opencompass_tasks(tmp_path, monkeypatch, model):
    monkeypatch.chdir(tmp_path)  # OpenCompass's inferencers make ./icl_inference_output when built
    from opencompass.datasets.custom import CustomDataset
    from opencompass.openicl.icl_evaluator import AccEvaluator
    from opencompass.openicl.icl_inferencer import PPLInferencer
    from opencompass.openicl.icl_prompt_template import PromptTemplate
    from opencompass.openicl.icl_retriever import ZeroRetriever
    from opencompass.tasks import OpenICLEvalTask, OpenICLInferTask

    data = tmp_path / "choice.jsonl"
    data.write_text("".join(json.dumps({"puzzle": r["puzzle"], "solution": r["solution"], "label": "A"}) + "\n"
                            for r in PUZZLES))
    templates = {"A": "Sudoku {puzzle} solved: {solution}", "B": "Sudoku {puzzle} solved: {puzzle}"}
    dataset = dict(abbr="choice", type=CustomDataset, path=str(data),
                   reader_cfg=dict(input_columns=["puzzle", "solution"], output_column="label"),
                   infer_cfg=dict(prompt_template=dict(type=PromptTemplate, template=templates),
                                  retriever=dict(type=ZeroRetriever), inferencer=dict(type=PPLInferencer)),
                   eval_cfg=dict(evaluator=dict(type=AccEvaluator)))
    cfg = ConfigDict(models=[dare_model("torch", "tiny-sdar", abbr="tiny", likelihood_options=EXACT)],
                     datasets=[[dataset]], work_dir=str(tmp_path / "oc"))
    OpenICLInferTask(cfg).run()
    OpenICLEvalTask(cfg).run()
    predictions = json.loads((tmp_path / "oc" / "predictions" / "tiny" / "choice.json").read_text())
    want = []
    for row in PUZZLES:
        ppl = model.get_ppl([t.format(**row) for t in templates.values()]).tolist()
        want.append("AB"[ppl.index(min(ppl))])
    assert [predictions[str(i)]["prediction"] for i in range(len(PUZZLES))] == want
    result = json.loads((tmp_path / "oc" / "results" / "tiny" / "choice.json").read_text())
    assert result["accuracy"] == 100 * want.count("A") / len(PUZZLES)
