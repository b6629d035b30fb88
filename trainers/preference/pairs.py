"""Preference pairs (prompt, chosen, rejected) for DPO / VRPO: the JSONL record, its loader and the batch.

One JSON object per line (:class:`PreferenceRecord`): ``benchmark`` names the benchmark whose prompt
template renders ``prompt`` + ``metadata`` exactly as evaluation does (a pair is trained on the prompt the
model is tested with); ``chosen`` / ``rejected`` are the assistant completions. Malformed lines fail with
one line naming the file, the line number and the problem. Without a file, a suite's pairs are the shipped
``harness/data/<benchmark>_preference.jsonl`` (sha256-checked; built by ``python -m
dare.trainers.preference.build``).

Batch layout (:func:`preference_batch`): 2N rows interleaved, row 2i = chosen and row 2i + 1 = rejected of
pair i, both with group id i, right-padded to one width like SFT batches (completion + EOS).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dare.harness import config as hcfg
from dare.harness.data import DATA_DIR, verified_path
from dare.harness.engine import InProcessEngine
from dare.harness.errors import DataError
from dare.harness.prompts import template
from dare.harness.records import Message, Sample

from ..batch import RolloutBatch
from ..training.rollout import text_pairs_batch


class PreferenceRecord(BaseModel):
    """One preference pair; unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    benchmark: str = Field(min_length=1, description="benchmark whose prompt template renders the prompt")
    prompt: str = Field(min_length=1, description="the raw question, as in the benchmark's data rows")
    reference: str | None = Field(None, description="the benchmark's reference answer (lets a verifier re-check)")
    sample_id: str | None = Field(None, description="id of the data row the prompt comes from")
    metadata: dict[str, Any] = Field(default_factory=dict, description="row fields the template reads (puzzle, ...)")
    chosen: str = Field(min_length=1)
    rejected: str = Field(min_length=1)
    source: str = Field("", description="how the pair was made (free text)")

    @field_validator("chosen", "rejected")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @model_validator(mode="after")
    def _differ(self) -> PreferenceRecord:
        if self.chosen == self.rejected:
            raise ValueError("chosen and rejected are identical")
        return self

    def sample(self) -> Sample:
        return Sample(id=self.sample_id or self.id, prompt=self.prompt, reference=self.reference,
                      metadata=self.metadata)


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]


def read_pairs(path: Path) -> list[PreferenceRecord]:
    """Every record of a preference JSONL file; a malformed line raises DataError naming its line number."""
    if not path.is_file():
        raise DataError(f"preference file {path} does not exist; pass a JSONL file of (prompt, chosen, rejected)")
    records = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path.name} line {lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path.name} line {lineno}: expected a JSON object, got {type(row).__name__}")
            try:
                records.append(PreferenceRecord.model_validate(row))
            except ValidationError as exc:
                raise DataError(f"{path.name} line {lineno}: {_problem(exc)}") from None
    if not records:
        raise DataError(f"preference file {path} holds no pairs")
    return records


@dataclass(frozen=True)
class PreferenceItem:
    """A pair ready for training: its benchmark spec (for the template) and the record."""

    benchmark: hcfg.BenchmarkSpec
    record: PreferenceRecord

    @property
    def messages(self) -> tuple[Message, ...]:
        return template(self.benchmark.prompt).render(self.record.sample())


def shipped_name(benchmark: str) -> str:
    return f"{benchmark}_preference.jsonl"


def preference_items(suite_name: str, pairs: str | None = None) -> list[PreferenceItem]:
    """The suite's preference pairs: from ``pairs`` (a JSONL path) or the shipped files of its benchmarks.
    Every record must name a benchmark of the suite."""
    suite = hcfg.suite(suite_name)
    specs = {b: hcfg.benchmark(b) for b in suite.benchmarks}
    if pairs is None:
        missing = [b for b in specs if not (DATA_DIR / shipped_name(b)).is_file()]
        if missing:
            shipped = sorted(p.name.removesuffix("_preference.jsonl") for p in DATA_DIR.glob("*_preference.jsonl"))
            raise DataError(f"no shipped preference pairs for {', '.join(missing)} (shipped: {', '.join(shipped)}); "
                            "pass a file with --set algo.pairs=PATH")
        sources = [verified_path(shipped_name(b))[0] for b in specs]
    else:
        sources = [Path(pairs).expanduser()]
    items = []
    for path in sources:
        for record in read_pairs(path):
            if record.benchmark not in specs:
                raise DataError(f"{path.name}: pair {record.id!r} names benchmark {record.benchmark!r}, which is not "
                                f"in suite {suite_name!r} ({', '.join(specs)}); train with a suite that has it")
            items.append(PreferenceItem(specs[record.benchmark], record))
    for spec in specs.values():
        template(spec.prompt)  # a missing template fails here, before any model is loaded
    return items


def preference_batch(engine: InProcessEngine, items: list[PreferenceItem], count_padding: bool) -> RolloutBatch:
    """Interleaved (chosen, rejected) rows of ``items``: completion + EOS, right-padded with the pad id.
    Masked-diffusion models see the padding (counted only with ``count_padding``), block-diffusion models
    never see it (as :func:`~dare.trainers.training.rollout.supervised_batch`)."""
    prompts, responses = [], []
    for it in items:
        ids = engine.prompt_ids(it.messages)
        for text in (it.record.chosen, it.record.rejected):
            prompts.append(ids)
            responses.append(text)
    group_ids = torch.arange(len(items)).repeat_interleave(2)
    return text_pairs_batch(engine.model, prompts, responses, count_padding, group_ids)
