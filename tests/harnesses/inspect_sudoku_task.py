"""A local inspect_ai task over DARE's shipped Sudoku test split: DARE's ``dare_sudoku`` prompt as the user turn,
graded by DARE's own Sudoku verifier (``inspect eval tests/harnesses/inspect_sudoku_task.py --model dare/...``)."""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

from dare.harness import config as cfg
from dare.harness.data import load_samples
from dare.harness.prompts import template
from dare.harness.verifiers import verifiers

SPEC = cfg.benchmark("sudoku")


@scorer(metrics=[accuracy()])
def dare_sudoku_verifier():
    verifier = verifiers.get(SPEC.verifier)(**SPEC.verifier_args)
    by_id = {s.id: s for s in load_samples(SPEC.data)}

    async def score(state: TaskState, target: Target) -> Score:
        verdict = verifier.verify(by_id[str(state.sample_id)], state.output.completion)
        return Score(value=CORRECT if verdict.passed else INCORRECT, answer=verdict.answer)

    return score


@task
def dare_sudoku(limit: int = 16):
    prompt = template(SPEC.prompt)
    samples = [Sample(id=s.id, input=prompt.render(s)[0].content, target=str(s.reference))
               for s in load_samples(SPEC.data)[:limit]]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=dare_sudoku_verifier())
