"""The OpenCompass bridge, run in the OpenCompass environment (skipped where opencompass is not installed).

Scores through OpenCompass (its own inference and evaluation tasks, in-process) must equal the native
runner's on the same generations; prompts must reach the engine exactly as DARE renders them; failures
must be errors, never an exit 0 with empty scores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("opencompass")

from mmengine.config import ConfigDict  # noqa: E402
from opencompass.openicl.icl_prompt_template import PromptTemplate  # noqa: E402

from dare.backends.opencompass.configs import check_importable, dare_dataset, dare_datasets, dare_model  # noqa: E402
from dare.backends.opencompass.dataset import DareBenchmarkDataset  # noqa: E402
from dare.backends.opencompass.messages import to_messages  # noqa: E402
from dare.harness import config  # noqa: E402
from dare.harness.cli import main  # noqa: E402
from dare.harness.data import load_samples  # noqa: E402
from dare.harness.errors import PrerequisiteError  # noqa: E402
from dare.harness.prompts import template  # noqa: E402
from dare.harness.verifiers import verifiers  # noqa: E402

LIMIT = 6


def dare_eval(capsys, *args: str) -> tuple[int, Path | None, str]:
    """dare-eval in this process (OpenCompass is imported once per test session, not per run)."""
    code = main(["--no-progress", *args])
    out, err = capsys.readouterr()
    return code, (Path(out.strip().splitlines()[-1]) if code == 0 else None), err


def load_run(run_dir: Path) -> tuple[dict, list[dict]]:
    record = json.loads((run_dir / "run.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    return record, rows


@pytest.fixture(scope="module")
def planning_completions(tmp_path_factory) -> Path:
    """k=2 per sample: the gold answer and the next sample's gold answer, for the first LIMIT samples of
    countdown and sudoku, with two gold answers blanked so scores sit strictly between 0 and 1."""
    lines = []
    for name in config.suite("planning").benchmarks:
        spec = config.benchmark(name)
        verifier = verifiers.get(spec.verifier)(**spec.verifier_args)
        samples = load_samples(spec.data)[:LIMIT + 1]
        gold = [verifier.gold_completion(s) for s in samples]
        for i, sample in enumerate(samples[:LIMIT]):
            lines.append({"id": sample.id, "completion": "" if i in (1, 4) else gold[i]})
            lines.append({"id": sample.id, "completion": gold[i + 1]})
    path = tmp_path_factory.mktemp("completions") / "planning.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_replayed_generations_score_the_same_through_opencompass(tmp_path, capsys, planning_completions):
    common = ["--suite", "planning", "--limit", str(LIMIT), "--completions", str(planning_completions),
              "--model", "replayed"]
    code, native_dir, err = dare_eval(capsys, "--backend", "replay", *common, "--out", str(tmp_path / "native"))
    assert code == 0, err
    code, oc_dir, err = dare_eval(capsys, "--engine", "opencompass", *common, "--out", str(tmp_path / "oc"))
    assert code == 0, err
    native, native_rows = load_run(native_dir)
    oc, oc_rows = load_run(oc_dir)
    for field in ("metrics", "counts", "benchmarks", "decoding", "model", "suite", "status", "isolation", "flags"):
        assert oc[field] == native[field], field
    assert oc["backend"] == {"name": "opencompass", "version": "0.5.4", "options": {"via": "replay"},
                             "rules": {}}  # an engine declares no commit rule; decoders do
    assert oc_rows == native_rows
    values = {b: m["accuracy"]["value"] for b, m in oc["metrics"].items()}
    assert oc["decoding"]["num_samples"] == 2 and all(0 < v < 1 for v in values.values()), values
    # OpenCompass's own results file agrees (in its percent convention)
    result = json.loads((oc_dir / "opencompass" / "results" / "replayed" / "dare-sudoku.json").read_text())
    assert result["accuracy"] == pytest.approx(100 * values["sudoku"])
    assert result["partial_credit"] == pytest.approx(100 * oc["metrics"]["sudoku"]["partial_credit"]["value"])


def test_tiny_llada_runs_end_to_end_through_opencompass(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    common = ["--model", "tiny-llada", "--suite", "sudoku", "--limit", "2", "--set", "engine.threads=1"]
    code, oc_dir, err = dare_eval(capsys, "--engine", "opencompass", *common, "--out", str(tmp_path / "oc"))
    assert code == 0, err
    code, native_dir, err = dare_eval(capsys, "--engine", "torch", *common, "--out", str(tmp_path / "native"))
    assert code == 0, err
    oc, oc_rows = load_run(oc_dir)
    native, native_rows = load_run(native_dir)
    assert oc["backend"]["options"] == {"via": "torch"} and oc["model"] == native["model"]
    assert [r["completion"] for r in oc_rows] == [r["completion"] for r in native_rows]
    assert all(r["nfe"] and r["completion"] for r in oc_rows)
    assert oc["metrics"] == native["metrics"] and oc["counts"]["sudoku"]["scored"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["native", "oc"]  # nothing left in the working directory


def test_unimportable_model_type_is_an_error_before_anything_runs():
    cfg = ConfigDict(models=[dict(type="dare_no_such_module.DareModel", abbr="m")],
                     datasets=[[dare_dataset("countdown", 1)]])
    with pytest.raises(PrerequisiteError,
                       match=r"config.models\[0\].type 'dare_no_such_module.DareModel' cannot be imported"):
        check_importable(cfg)
    check_importable(ConfigDict(models=[dict(type="dare.backends.opencompass.model.DareModel")]))  # ours imports


@pytest.mark.parametrize("via, model, message", [("no_such_engine", "tiny-llada", "unknown engine 'no_such_engine'"),
                                                 ("lmdeploy", "tiny-sdar", "pip install 'lmdeploy")])
def test_unusable_inner_engine_exits_2_with_one_line(tmp_path, capsys, via, model, message):
    code, _, err = dare_eval(capsys, "--engine", "opencompass", "--model", model, "--suite", "sudoku",
                             "--limit", "1", "--set", f"engine.via={via}", "--out", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.parametrize("benchmark", sorted(b for b in config.names("benchmarks")
                                             if config.benchmark(b).task == "generate"))
def test_opencompass_prompts_reach_the_engine_as_dare_renders_them(benchmark):
    ds = dare_dataset(benchmark, limit=3)
    tmpl = PromptTemplate(template=ds["infer_cfg"]["prompt_template"]["template"])
    rows = DareBenchmarkDataset.load(benchmark, limit=3)
    expected = template(config.benchmark(benchmark).prompt)
    for row, sample in zip(rows, load_samples(config.benchmark(benchmark).data)):
        assert row["dare_id"] == sample.id
        assert to_messages(tmpl.generate_item(row, output_field="dare_id")) == expected.render(sample)


def test_config_builders_describe_models_and_suites():
    datasets = dare_datasets("planning", limit=2)
    assert [d["abbr"] for d in datasets] == ["dare-countdown", "dare-sudoku"]
    model = dare_model("torch", "tiny-llada", benchmarks=["sudoku"])
    default = config.model("tiny-llada").decoding_for("sudoku")  # the model's own decoding settings
    assert model["max_out_len"] == default["gen_length"] and model["batch_size"] == default["batch_size"]
    assert model["benchmarks"] == ["sudoku"]
    check_importable(ConfigDict(models=[model], datasets=[datasets]))


def test_dare_model_serves_opencompass_own_dataset_and_evaluator(tmp_path, monkeypatch):
    """The other direction: an OpenCompass dataset (CustomDataset, OpenCompass's MATHVerifyEvaluator) on a
    DARE engine built from the registry by OpenCompass's own task; the empty BOT turn is the answer slot."""
    monkeypatch.chdir(tmp_path)  # OpenCompass's inferencers make ./icl_inference_output when built
    from opencompass.datasets.custom import CustomDataset
    from opencompass.evaluator.math_evaluator import MATHVerifyEvaluator
    from opencompass.openicl.icl_inferencer import GenInferencer
    from opencompass.openicl.icl_retriever import ZeroRetriever
    from opencompass.tasks import OpenICLEvalTask, OpenICLInferTask

    from dare.backends.engines.torch import TorchEngine
    from dare.backends.opencompass.messages import prompt_hash
    from dare.harness.engine import EngineContext, GenerationRequest, request_seed
    from dare.harness.records import DecodingConfig, Message

    data = tmp_path / "toy.jsonl"
    data.write_text('{"question": "1+1?", "answer": "2"}\n{"question": "2+3?", "answer": "5"}\n')
    dataset = dict(abbr="toy", type=CustomDataset, path=str(data),
                   reader_cfg=dict(input_columns=["question"], output_column="answer"),
                   infer_cfg=dict(prompt_template=dict(type=PromptTemplate, template=dict(
                       round=[dict(role="HUMAN", prompt="Q: {question}"), dict(role="BOT", prompt="{answer}")])),
                       retriever=dict(type=ZeroRetriever), inferencer=dict(type=GenInferencer)),
                   eval_cfg=dict(evaluator=dict(type=MATHVerifyEvaluator)))
    model = dare_model("torch", "tiny-llada", abbr="tiny", engine_options={"threads": 1}, decoding={"seed": 3})
    cfg = ConfigDict(models=[model], datasets=[[dataset]], work_dir=str(tmp_path / "oc"))
    OpenICLInferTask(cfg).run()
    OpenICLEvalTask(cfg).run()
    predictions = json.loads((tmp_path / "oc" / "predictions" / "tiny" / "toy.json").read_text())
    result = json.loads((tmp_path / "oc" / "results" / "tiny" / "toy.json").read_text())
    assert 0 <= result["accuracy"] <= 100

    spec = config.model("tiny-llada")
    engine = TorchEngine(EngineContext(model_name="tiny-llada", model_spec=spec, options={"threads": 1}))
    decoding = DecodingConfig(**{**spec.decoding_for("default"), "seed": 3})
    for i, question in enumerate(["1+1?", "2+3?"]):
        messages = (Message(role="user", content=f"Q: {question}"),)
        sample_id = f"oc-{prompt_hash(messages)}"
        [expected] = engine.generate([GenerationRequest(sample_id, 0, messages, request_seed(3, sample_id, 0))],
                                     decoding)
        assert predictions[str(i)]["origin_prompt"] == [{"role": "user", "content": f"Q: {question}"}]
        assert predictions[str(i)]["prediction"] == expected.text
