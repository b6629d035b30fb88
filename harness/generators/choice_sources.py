"""The likelihood benchmarks' rows from their public source files, in lm-eval's processed form.

Each converter reads a source release as published (see harness/data/README.md for where each copy came
from) and writes the rows harness/choice.py scores: what lm_eval 0.4.8's task YAML makes of a document
(``tasks/arc/arc_easy.yaml``, ``tasks/mmlu/default/_default_template_yaml``, ``tasks/piqa/piqa.yaml``,
``tasks/winogrande/preprocess_winogrande.py``, ``tasks/truthfulqa/truthfulqa_mc2.yaml``,
``tasks/hellaswag/utils.py``): the question text with its template applied, the choices, the gold index. Row
order is the source's (lm-eval's few-shot draws and ``--limit`` follow it).

    python -m dare.harness.generators.choice_sources SOURCE_DIR     # rewrites the files under harness/data
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

from ..data import DATA_DIR
from . import write_files


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _labels(path: Path) -> list[int]:
    return [int(line) for line in path.read_text(encoding="utf-8").split()]


def arc(path: Path) -> list[dict]:
    """ARC (AI2 ARC-V1-Feb2018 jsonl): "Question: {stem}\\nAnswer:", the choice texts, the key's index."""
    rows = []
    for doc in _jsonl(path):
        choices = doc["question"]["choices"]
        labels = [c["label"] for c in choices]
        rows.append({"id": f"arc_challenge/{doc['id']}", "query": f"Question: {doc['question']['stem']}\nAnswer:",
                     "choices": [c["text"] for c in choices], "gold": labels.index(doc["answerKey"])})
    return rows


def mmlu(directory: Path, split: str) -> list[dict]:
    """MMLU (one CSV per subject, header question,choice0..3,answer index): the question stripped, its four
    options as "A. ...", "Answer:"; choices A-D; ``subject`` with spaces (the description names it)."""
    rows = []
    for path in sorted(directory.glob(f"*_{split}.csv")):
        subject = path.name.removesuffix(f"_{split}.csv")
        with open(path, newline="", encoding="utf-8") as f:
            for i, rec in enumerate(csv.DictReader(f)):
                options = "".join(f"\n{letter}. {rec[f'choice{j}']}" for j, letter in enumerate("ABCD"))
                rows.append({"id": f"mmlu/{subject}/{split}/{i}", "subject": subject.replace("_", " "),
                             "query": f"{rec['question'].strip()}{options}\nAnswer:", "choices": list("ABCD"),
                             "gold": int(rec["answer"])})
    return rows


def piqa(path: Path, labels: Path) -> list[dict]:
    """PIQA (goal, sol1, sol2; labels in a separate list): "Question: {goal}\\nAnswer:", the two solutions."""
    return [{"id": f"piqa/validation/{i}", "query": f"Question: {doc['goal']}\nAnswer:",
             "choices": [doc["sol1"], doc["sol2"]], "gold": label}
            for i, (doc, label) in enumerate(zip(_jsonl(path), _labels(labels), strict=True))]


def winogrande(path: Path, labels: Path) -> list[dict]:
    """WinoGrande 1.1 (partial scoring): the sentence up to the blank with each option as the contexts, the
    rest of the sentence after the blank (stripped) as the shared continuation."""
    rows = []
    for doc, label in zip(_jsonl(path), _labels(labels), strict=True):
        blank = doc["sentence"].index("_")
        rows.append({"id": f"winogrande/{doc['qID']}",
                     "contexts": [doc["sentence"][:blank] + doc[f"option{k}"] for k in (1, 2)],
                     "continuation": doc["sentence"][blank + 1:].strip(), "gold": label - 1})
    return rows


def truthfulqa_mc2(path: Path) -> list[dict]:
    """TruthfulQA's multiple-choice file (the 817-question release the hub's truthful_qa copies): "Q: {question}
    \nA:" (the QA primer is the benchmark's description), the mc2 answers in file order; the true answers are
    those before the first false one, lm-eval's rule (``process_results_mc2``: two rows list a true answer after
    a false one, which it counts as false)."""
    rows = []
    for i, doc in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        labels = list(doc["mc2_targets"].values())
        rows.append({"id": f"truthfulqa_mc2/{i}", "query": f"Q: {doc['question']}\nA:",
                     "choices": list(doc["mc2_targets"]), "gold": list(range(labels.index(0)))})
    return rows


def _hellaswag_text(text: str) -> str:
    """lm-eval's hellaswag ``preprocess``: WikiHow's ``[title]`` markers become sentence ends, other bracketed
    markers go, then each double space becomes one (a single pass: three spaces leave two)."""
    text = text.strip().replace(" [title]", ". ")
    return re.sub(r"\[.*?\]", "", text).replace("  ", " ")


def arrow_docs(path: Path) -> list[dict]:
    """The documents of one split as ``datasets`` saves it (``save_to_disk``: one Arrow stream per shard)."""
    try:
        import pyarrow as pa
    except ImportError as err:  # a maintainer's tool: the core does not need pyarrow
        raise SystemExit(f"reading {path.name} needs pyarrow; pip install pyarrow") from err
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_stream(source).read_all().to_pylist()


def hellaswag(path: Path) -> list[dict]:
    """HellaSwag validation (the hub's ``hellaswag`` dataset, saved by ``datasets``): "{activity_label}: {ctx_a}
    {ctx_b capitalised}" and the four endings, each through lm-eval's preprocess."""
    return [{"id": f"hellaswag/validation/{i}",
             "query": _hellaswag_text(f"{doc['activity_label']}: {doc['ctx_a']} {doc['ctx_b'].capitalize()}"),
             "choices": [_hellaswag_text(ending) for ending in doc["endings"]], "gold": int(doc["label"])}
            for i, doc in enumerate(arrow_docs(path))]


def convert(source: Path) -> dict[str, list[dict]]:
    """Data file name -> rows, from ``source`` laid out as the copies are (see harness/data/README.md)."""
    wino = source / "winogrande_1.1"
    return {
        "arc_challenge_test.jsonl": arc(source / "ARC" / "ARC-Challenge-Test.jsonl"),
        "arc_challenge_train.jsonl": arc(source / "ARC" / "ARC-Challenge-Train.jsonl"),
        "mmlu_test.jsonl": mmlu(source / "mmlu" / "test", "test"),
        "mmlu_dev.jsonl": mmlu(source / "mmlu" / "dev", "dev"),
        "piqa_validation.jsonl": piqa(source / "piqa" / "valid.jsonl", source / "piqa" / "valid-labels.lst"),
        "winogrande_validation.jsonl": winogrande(wino / "dev.jsonl", wino / "dev-labels.lst"),
        "winogrande_train_l.jsonl": winogrande(wino / "train_l.jsonl", wino / "train_l-labels.lst"),
        "truthfulqa_mc2_validation.jsonl": truthfulqa_mc2(source / "TruthfulQA" / "mc_task.json"),
        "hellaswag_validation.jsonl": hellaswag(source / "hellaswag" / "validation" / "data-00000-of-00001.arrow"),
    }


def write(source: Path, directory: Path = DATA_DIR) -> list[Path]:
    return write_files(convert(source), directory)


if __name__ == "__main__":
    from dare.harness.cliutil import emit

    for written in write(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else DATA_DIR):
        emit(written)
