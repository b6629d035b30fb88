"""A local lm-eval ``generate_until`` task over DARE's shipped Sudoku test split, graded by DARE's own Sudoku
verifier, so lm-eval's numbers and dare-eval's can be compared on the same data and settings. The prompt is
DARE's ``dare_sudoku`` template with lm-eval's Jinja placeholder; nothing is fetched."""

from __future__ import annotations

from pathlib import Path

from dare.harness import config as cfg
from dare.harness.data import row_to_sample, verified_path
from dare.harness.prompts import template
from dare.harness.verifiers import verifiers

TASK = "dare_sudoku_gen"


def process_results(doc: dict, results: list[str]) -> dict[str, float]:
    """DARE's Sudoku verdict of lm-eval's output (the benchmark's own verifier options)."""
    spec = cfg.benchmark("sudoku")
    verdict = verifiers.get(spec.verifier)(**spec.verifier_args).verify(row_to_sample(doc), results[0])
    return {"accuracy": float(verdict.passed)}


def write_task(folder: Path, max_gen_toks: int) -> Path:
    """The task's YAML and this module beside it (lm-eval's ``!function`` reads a module next to the YAML)."""
    data, _ = verified_path(cfg.benchmark("sudoku").data)
    prompt = template("dare_sudoku").messages[0].content.replace("{puzzle}", "{{puzzle}}")
    (folder / "dare_sudoku_utils.py").write_text(Path(__file__).read_text(encoding="utf-8"), encoding="utf-8")
    lines = [f"task: {TASK}", "dataset_path: json", "dataset_kwargs:", "  data_files:", f"    test: {data}",
             "test_split: test", "output_type: generate_until", f"doc_to_text: {prompt!r}",
             "doc_to_target: solution", "process_results: !function dare_sudoku_utils.process_results",
             "metric_list:", "  - metric: accuracy", "    aggregation: mean", "    higher_is_better: true",
             "generation_kwargs:", "  until: ['</answer>']", f"  max_gen_toks: {max_gen_toks}",
             "  do_sample: false", "metadata:", "  version: 1.0"]
    path = folder / f"{TASK}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
