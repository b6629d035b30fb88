"""Prompt templates: data-only YAML files under ``configs/prompts/`` rendered into chat messages.

A template is a list of messages whose text may name ``{placeholders}``: ``prompt`` (the raw question),
``reference``, any field of the data row (``numbers``, ``target``, ``puzzle``, ...) and derived fields
(``fields: {tests: {join: test_list, sep: "\\n"}}``). Only ``{identifier}`` placeholders that the
sample provides are substituted, so LaTeX such as ``\\boxed{...}`` passes through untouched. A trailing
assistant message is a prefix the model continues. The chat template of the model is applied later, by
the engine.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from pydantic import Field

from .config import Spec, _load, catalog
from .errors import DataError
from .records import Message, Sample, canonical_json, sha256_text

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class JoinField(Spec):
    join: str = Field(description="metadata list field to join")
    sep: str = "\n"


class PromptTemplate(Spec):
    """A prompt template: messages with placeholders, plus derived fields."""

    name: str
    description: str = ""
    source: str = ""
    fields: dict[str, JoinField] = Field(default_factory=dict)
    messages: list[Message]

    def template_hash(self) -> str:
        """Identity of the template text (recorded in the run record)."""
        return sha256_text(canonical_json(self.model_dump(mode="json", exclude={"description", "source"})))[:16]

    def values(self, sample: Sample) -> dict[str, Any]:
        values: dict[str, Any] = {**sample.metadata, "prompt": sample.prompt, "reference": sample.reference,
                                  "id": sample.id}
        for name, spec in self.fields.items():
            items = sample.metadata.get(spec.join)
            if not isinstance(items, list):
                raise DataError(f"prompt template {self.name!r} joins field {spec.join!r}, "
                                f"which sample {sample.id} lacks")
            values[name] = spec.sep.join(str(x) for x in items)
        return values

    def render(self, sample: Sample) -> tuple[Message, ...]:
        """The chat messages for ``sample``."""
        values = self.values(sample)

        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            return str(values[key]) if key in values else match.group(0)

        return tuple(Message(role=m.role, content=_PLACEHOLDER.sub(fill, m.content)) for m in self.messages)


@functools.cache
def template(name: str) -> PromptTemplate:
    """Load a prompt template by name from configs/prompts."""
    return _load("prompts", name, PromptTemplate, "prompt template")


def template_names() -> list[str]:
    return sorted(catalog("prompts"))
