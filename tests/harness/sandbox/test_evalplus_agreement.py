"""benchmarks/evalplus_agreement.py scores the same programs with DARE's verifier and with EvalPlus's checker.

One MBPP+ task (its EvalPlus row rebuilt from DARE's shipped one) and four hand-written answers: correct, a
correct program inside a markdown block (built into a program as DARE builds completions), wrong, and too
slow (EvalPlus fails it by its time limit). Both verdict columns must be there and agree.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from dare.harness.data import load_rows

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "evalplus_agreement.py"
TASK = "Mbpp/2"


@pytest.fixture(scope="module")
def agreement():
    spec = importlib.util.spec_from_file_location("evalplus_agreement", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture()
def evalplus_file(tmp_path, monkeypatch):
    """An EvalPlus-format MBPP+ file of one task, and EvalPlus's caches kept inside tmp_path."""
    import evalplus.data.mbpp
    import evalplus.evaluate

    row = next(r for r in load_rows("mbppplus.jsonl") if r["id"] == TASK)
    fields = ("prompt", "entry_point", "canonical_solution", "base_input", "plus_input", "atol", "contract")
    path = tmp_path / "MbppPlus-one.jsonl"
    path.write_text(json.dumps({"task_id": TASK, **{k: row[k] for k in fields}, "assertion": row["test"]}) + "\n")
    monkeypatch.setenv("MBPP_OVERRIDE_PATH", str(path))  # restored after the test (the script sets both)
    monkeypatch.setattr(evalplus.data.mbpp, "MBPP_OVERRIDE_PATH", str(path))
    monkeypatch.setattr(evalplus.evaluate, "CACHE_DIR", str(tmp_path / "evalplus-cache"))
    return path, row["canonical_solution"]


def test_both_verdicts_side_by_side(agreement, evalplus_file, tmp_path):
    path, gold = evalplus_file
    slow = gold.replace("):\n", "):\n  import time; time.sleep(30)\n", 1)  # far past any scaled limit
    answers = {
        "correct": {"solution": gold},
        "fenced": {"completion": f"Here it is:\n```python\n{gold}\n```\nDone."},
        "wrong": {"solution": "def similar_elements(a, b):\n    return tuple(a)\n"},
        "slow": {"solution": slow},
    }
    rows = [{"task_id": TASK, "source": name, "model": "hand-written", "key": name, **body}
            for name, body in answers.items()]
    results = {r["key"]: r for r in agreement.run_agreement(rows, "mbpp", path, workers=2,
                                                            rows_path=tmp_path / "rows.jsonl", cache_dir=tmp_path)}

    assert {k: (r["dare_passed"], r["evalplus_base"], r["evalplus_plus"]) for k, r in results.items()
            if k != "slow"} == {"correct": (True, "pass", "pass"), "fenced": (True, "pass", "pass"),
                                "wrong": (False, "fail", "fail")}
    slow_row = results["slow"]
    assert slow_row["dare_passed"] is False and slow_row["dare_failure"] == "timeout"
    assert slow_row["evalplus_base"] != "pass"
    assert all(r["agree"] and not r.get("tests_differ") for r in results.values())
    assert results["fenced"]["program"].strip() == gold.strip()  # the markdown block became the program

    table = agreement.summarize(list(results.values()))
    assert [(t["scored"], t["agree"], t["disagree"]) for t in table] == [(1, 1, 0)] * 4
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 4  # what a rerun resumes from


def test_recheck_verdicts(agreement):
    """A disagreement checked again alone: a timing effect on either side, or a genuine difference."""
    def row(dare, base, plus, again_dare, again_base, again_plus):
        return {"dare_passed": dare, "dare_failure": None if dare else "timeout", "evalplus_base": base,
                "evalplus_plus": plus, "recheck": {"dare_passed": again_dare, "evalplus_base": again_base,
                                                   "evalplus_plus": again_plus}}

    verdict = agreement._recheck_verdict
    assert verdict(row(True, "pass", "timeout", True, "pass", "pass")) == "EvalPlus timeout under load, passes alone"
    assert verdict(row(True, "pass", "fail", True, "pass", "pass")) == "EvalPlus fail under load, passes alone"
    assert verdict(row(False, "pass", "pass", True, "pass", "pass")) == "DARE timeout under load, passes alone"
    assert verdict(row(True, "pass", "fail", True, "pass", "fail")).startswith("genuine")
