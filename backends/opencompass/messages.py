"""OpenCompass prompts <-> DARE chat messages, and sample ids for prompts DARE knows.

OpenCompass hands a model either a plain string or a ``PromptList`` of ``{"role": HUMAN|BOT|SYSTEM,
"prompt": ...}`` items (plus ``{"section": ..., "pos": ...}`` markers). DARE engines take chat messages
and apply the model's own chat template, so the bridge converts instead of letting OpenCompass flatten the
dialogue into one string: the engine then sees exactly what the native runner would send it.

A generation's seed is derived from its sample id (``request_seed``), and the replay engine looks
completions up by sample id. OpenCompass passes prompts only, so :class:`SampleIndex` maps a rendered DARE
prompt back to its sample id; prompts it does not know (OpenCompass's own datasets) get a stable id from
their hash.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from dare.harness import config as cfg
from dare.harness.data import load_samples
from dare.harness.engine import GenerationRequest
from dare.harness.errors import InputError
from dare.harness.prompts import template
from dare.harness.records import Message

# OpenCompass dialogue roles (and the OpenAI-style ones some configs use) -> DARE roles
ROLES = {"HUMAN": "user", "BOT": "assistant", "SYSTEM": "system",
         "user": "user", "assistant": "assistant", "system": "system"}
# DARE roles -> the OpenCompass roles a dataset template uses
OC_ROLES = {"user": "HUMAN", "assistant": "BOT", "system": "SYSTEM"}


def is_single_prompt(prompt: Any) -> bool:
    """A string, a PromptList, or one OpenAI-style message list; anything else is a batch of prompts."""
    if isinstance(prompt, str) or type(prompt).__name__ == "PromptList":
        return True
    return isinstance(prompt, list) and bool(prompt) and all(isinstance(p, dict) for p in prompt)


def to_messages(prompt: Any) -> tuple[Message, ...]:
    """DARE messages for one OpenCompass prompt. An empty trailing BOT turn is OpenCompass's generation slot
    and is dropped; a non-empty one is a prefix the model continues (as in DARE's own templates)."""
    if isinstance(prompt, str):
        return (Message(role="user", content=prompt),)
    out: list[Message] = []
    for item in prompt:
        if isinstance(item, str):  # bare text between sections joins the turn it follows
            if out:
                out[-1] = Message(role=out[-1].role, content=out[-1].content + item)
            else:
                out.append(Message(role="user", content=item))
            continue
        if "section" in item and "role" not in item:
            continue
        role = ROLES.get(item.get("role", ""))
        if role is None:
            raise InputError(f"OpenCompass prompt role {item.get('role')!r} is not one of {', '.join(sorted(ROLES))}")
        out.append(Message(role=role, content=str(item.get("prompt", item.get("content", "")))))
    if out and out[-1].role == "assistant" and not out[-1].content:
        out.pop()
    if not out:
        raise InputError("OpenCompass gave an empty prompt; check the dataset's prompt_template")
    return tuple(out)


def as_dicts(messages: Sequence[Message]) -> list[dict[str, str]]:
    """JSON form kept by OpenCompass as ``origin_prompt`` in its predictions files."""
    return [{"role": m.role, "content": m.content} for m in messages]


def prompt_hash(messages: Sequence[Message]) -> str:
    return GenerationRequest("", 0, tuple(messages), 0).prompt_hash


class SampleIndex:
    """Rendered prompt of every sample of some DARE benchmarks -> sample id.

    Samples with identical prompts are handed out in file order, which is the order OpenCompass reads them.
    """

    def __init__(self, benchmarks: Iterable[str] = (), limit: int | None = None):
        self._ids: dict[str, list[str]] = defaultdict(list)
        self._next: dict[str, int] = defaultdict(int)
        self.sample_ids: set[str] = set()
        self.benchmarks: list[str] = []
        for name in benchmarks:
            self.add(name, limit)

    def add(self, name: str, limit: int | None = None) -> None:
        """Index the samples of benchmark ``name`` (the first ``limit``); a benchmark already there is skipped."""
        if name in self.benchmarks:
            return
        self.benchmarks.append(name)
        spec = cfg.benchmark(name)
        tmpl = template(spec.prompt)
        samples = load_samples(spec.data)
        self.sample_ids.update(s.id for s in samples)  # every id, so replay can tell unknown from limited
        for sample in samples[:limit] if limit is not None else samples:
            self._ids[prompt_hash(tmpl.render(sample))].append(sample.id)

    def sample_id(self, messages: Sequence[Message]) -> str:
        digest = prompt_hash(messages)
        ids = self._ids.get(digest)
        if not ids:
            return f"oc-{digest}"
        position = self._next[digest]
        self._next[digest] = position + 1
        return ids[position % len(ids)]
