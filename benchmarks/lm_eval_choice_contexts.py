"""The requests lm-eval itself builds for a few questions of the shipped choice benchmarks (a test fixture).

Runs lm_eval 0.4.8's own ``ConfigurableTask`` (the task YAMLs of its wheel: ``tasks/arc/arc_easy.yaml`` as
arc_challenge, ``tasks/mmlu/default/_default_template_yaml`` as mmlu_abstract_algebra, ``tasks/winogrande/
default.yaml``, ``tasks/piqa/piqa.yaml``, ``tasks/truthfulqa/truthfulqa_mc2.yaml``, ``tasks/hellaswag/
hellaswag.yaml`` with its ``process_docs``) on local JSON copies of the source documents, with the evaluator's
default few-shot seed 1234, and writes each question's (context, continuation) pairs from ``fewshot_context`` and
``construct_requests`` to tests/harness/fixtures/lm_eval_choice_contexts.json; for TruthfulQA also
``process_results_mc2`` of made-up log-likelihoods (-0.1 per continuation character), its row 25 included (a true
answer listed after a false one); for HellaSwag also the sha256 of every validation row as lm-eval's
``process_docs`` makes it (``[query, choices, gold]`` per row, as one JSON list). tests/harness/
test_choice_lm_eval.py checks DARE's contexts and rows against them. Only the outputs are kept.

    pip install --no-deps --target /tmp/lmeval lm-eval==0.4.8 (plus its import-time dependencies)
    PYTHONPATH=/tmp/lmeval python benchmarks/lm_eval_choice_contexts.py SOURCE_DIR
      (SOURCE_DIR laid out as for ``python -m dare.harness.generators.choice_sources``)
"""

from __future__ import annotations

import csv
import hashlib
import json
import sys
import tempfile
import types
from pathlib import Path

from dare.harness.generators.choice_sources import arrow_docs

OUT = Path(__file__).resolve().parents[1] / "tests" / "harness" / "fixtures" / "lm_eval_choice_contexts.json"
WHEEL_SHA256 = "2ba377e067affcfcd27b73d6c045f8ce9ff88accd56176d9a86af3c12b0e01f6"  # lm_eval-0.4.8-py3-none-any.whl


def _docs(source: Path) -> dict[str, list[dict]]:
    """The source documents in the shape lm-eval's task YAMLs read (the hub datasets' fields)."""
    def arc(path):
        return [{"id": d["id"], "question": d["question"]["stem"],
                 "choices": {"text": [c["text"] for c in d["question"]["choices"]],
                             "label": [c["label"] for c in d["question"]["choices"]]}, "answerKey": d["answerKey"]}
                for d in map(json.loads, path.read_text().splitlines())]

    def mmlu(split):
        with open(source / "mmlu" / split / f"abstract_algebra_{split}.csv", newline="") as f:
            return [{"question": r["question"], "subject": "abstract_algebra", "answer": int(r["answer"]),
                     "choices": [r[f"choice{j}"] for j in range(4)]} for r in csv.DictReader(f)]

    def labelled(path, labels, key, cast):
        return [{**json.loads(line), key: cast(lab)}
                for line, lab in zip(path.read_text().splitlines(), labels.read_text().split())]

    wino, piqa = source / "winogrande_1.1", source / "piqa"
    truthful = json.loads((source / "TruthfulQA" / "mc_task.json").read_text())
    hub = [{"question": d["question"], **{k: {"choices": list(d[k]), "labels": list(d[k].values())}
                                          for k in ("mc1_targets", "mc2_targets")}} for d in truthful]
    return {"arc_test": arc(source / "ARC" / "ARC-Challenge-Test.jsonl")[:4],
            "arc_train": arc(source / "ARC" / "ARC-Challenge-Train.jsonl"),
            "mmlu_test": mmlu("test")[:3], "mmlu_dev": mmlu("dev"),
            "wino_dev": labelled(wino / "dev.jsonl", wino / "dev-labels.lst", "answer", str)[:4],
            "wino_train": labelled(wino / "train_l.jsonl", wino / "train_l-labels.lst", "answer", str),
            "piqa_val": labelled(piqa / "valid.jsonl", piqa / "valid-labels.lst", "label", int)[:3],
            "truthfulqa": [hub[i] for i in TRUTHFULQA_ROWS], "hellaswag_val": hellaswag(source)[:3]}


TRUTHFULQA_ROWS = [0, 1, 2, 25]


def hellaswag(source: Path) -> list[dict]:
    """The hub's hellaswag validation documents (see harness/data/README.md for the copy)."""
    return arrow_docs(source / "hellaswag" / "validation" / "data-00000-of-00001.arrow")


def rows_sha256(rows) -> str:
    """sha256 of ``[[query, choices, gold], ...]`` as JSON (tests/harness/test_choice_lm_eval.py computes the same)."""
    return hashlib.sha256(json.dumps([[r["query"], r["choices"], r["gold"]] for r in rows]).encode()).hexdigest()


def main(source: Path) -> None:
    sys.modules["lm_eval.models"] = types.ModuleType("lm_eval.models")  # its model classes are not needed here
    import lm_eval
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.utils import load_yaml_config

    tasks = Path(lm_eval.__file__).parent / "tasks"
    tmp = Path(tempfile.mkdtemp())
    for name, docs in _docs(source).items():
        (tmp / f"{name}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))

    def run(yaml, files, shots, base=None, **over):
        config = load_yaml_config(str(tasks / base)) if base else {}
        config.update(load_yaml_config(str(tasks / yaml)))
        for key in ("include", "tag", "dataset_name"):
            config.pop(key, None)
        config.update(dataset_path="json", dataset_kwargs={"data_files": {k: str(tmp / v) for k, v in files.items()}},
                      **over)
        task = ConfigurableTask(config=config)
        task.set_fewshot_seed(1234)  # the evaluator's default fewshot_random_seed
        docs = task.test_docs() if task.has_test_docs() else task.validation_docs()
        requests = [[list(i.arguments) for i in task.construct_requests(doc, task.fewshot_context(doc, shots),
                                                                         metadata=("t", 0, 1))] for doc in docs]
        case = {"num_fewshot": shots, "requests": requests}
        if yaml.startswith("truthfulqa"):
            from lm_eval.tasks.truthfulqa.utils import process_results_mc2

            case["rows"] = TRUTHFULQA_ROWS
            case["mc2"] = [process_results_mc2(doc, [(-0.1 * len(cont), False) for _, cont in reqs])["acc"]
                           for doc, reqs in zip(docs, requests)]
        if yaml.startswith("hellaswag"):
            import datasets

            case["rows_sha256"] = rows_sha256(config["process_docs"](datasets.Dataset.from_list(hellaswag(source))))
        return case

    about = "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
    cases = {
        "arc_challenge": run("arc/arc_easy.yaml", {"train": "arc_train.jsonl", "test": "arc_test.jsonl"}, 3,
                             task="arc_challenge", validation_split=None),
        "mmlu": run("mmlu/default/_default_template_yaml", {"dev": "mmlu_dev.jsonl", "test": "mmlu_test.jsonl"}, 5,
                    task="mmlu_abstract_algebra", description=about),
        "winogrande": run("winogrande/default.yaml", {"train": "wino_train.jsonl", "validation": "wino_dev.jsonl"}, 5),
        "piqa": run("piqa/piqa.yaml", {"validation": "piqa_val.jsonl"}, 0, training_split=None),
        "truthfulqa_mc2": run("truthfulqa/truthfulqa_mc2.yaml", {"validation": "truthfulqa.jsonl"}, 0,
                              base="truthfulqa/truthfulqa_mc1.yaml"),
        "hellaswag": run("hellaswag/hellaswag.yaml", {"validation": "hellaswag_val.jsonl"}, 0, training_split=None),
    }
    OUT.write_text(json.dumps({"source": f"lm_eval 0.4.8 wheel sha256 {WHEEL_SHA256}: api/task.py "
                               "ConfigurableTask.fewshot_context and construct_requests, api/samplers.py "
                               "ContextSampler.get_context, fewshot seed 1234", "cases": cases}, indent=1) + "\n")
    print(OUT)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
