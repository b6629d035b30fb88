"""``DareBenchmarkDataset``: a DARE benchmark (shipped, sha256-checked data) as an OpenCompass dataset.

Each row holds the sample id (``dare_id``, the output column handed to the evaluator as the reference) and
the sample's chat messages as rendered by DARE's own prompt template (``dare_m0``, ``dare_m1``, ...). The
OpenCompass prompt template built by :func:`prompt_template` only places those columns into dialogue
turns, so the prompt text is DARE's, byte for byte. Registered in ``opencompass.registry.LOAD_DATASET``.
"""

from __future__ import annotations

from datasets import Dataset
from opencompass.datasets.base import BaseDataset
from opencompass.registry import LOAD_DATASET

from dare.harness import config as cfg
from dare.harness.data import load_samples
from dare.harness.errors import InputError
from dare.harness.prompts import template

from .messages import OC_ROLES

ID_COLUMN = "dare_id"


def message_columns(benchmark: str) -> list[str]:
    """Column names of the rendered messages of a benchmark's prompt template, in order."""
    return [f"dare_m{i}" for i in range(len(template(cfg.benchmark(benchmark).prompt).messages))]


def prompt_template(benchmark: str) -> dict:
    """OpenCompass ``PromptTemplate`` argument: leading system turns in ``begin``, the rest as one round."""
    messages = template(cfg.benchmark(benchmark).prompt).messages
    turns = [dict(role=OC_ROLES[m.role], prompt=f"{{{column}}}")
             for m, column in zip(messages, message_columns(benchmark))]
    leading = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    begin = [dict(turn, fallback_role="HUMAN") for turn in turns[:leading]]
    return dict(begin=begin, round=turns[leading:]) if begin else dict(round=turns)


@LOAD_DATASET.register_module()
class DareBenchmarkDataset(BaseDataset):
    """Rows of one DARE benchmark; ``limit`` keeps the first N samples in file order (like ``--limit``)."""

    @staticmethod
    def load(benchmark: str, limit: int | None = None) -> Dataset:
        spec = cfg.benchmark(benchmark)
        if limit is not None and limit < 1:
            raise InputError(f"limit must be at least 1, got {limit}")
        samples = load_samples(spec.data)
        samples = samples[:limit] if limit is not None else samples
        tmpl = template(spec.prompt)
        columns = message_columns(benchmark)
        rows = []
        for sample in samples:
            rendered = tmpl.render(sample)
            rows.append({ID_COLUMN: sample.id, **{c: m.content for c, m in zip(columns, rendered)}})
        return Dataset.from_list(rows)
