"""The small model API every engine implements (torch, fastdllm, lmdeploy, sglang, replay, ...).

An engine turns :class:`GenerationRequest` s into :class:`~dare.harness.records.Generation` s under
one :class:`~dare.harness.records.DecodingConfig`. Requests carry their own seed, derived from the
run seed, the sample id and the sample index, so a request decodes the same whatever batch it is in.
Engines are registered by name in ``registry.engines`` (lazily) and built with :class:`EngineContext`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .config import ModelSpec
from .records import DecodingConfig, Generation, Message, ModelInfo, sha256_text


@dataclass(frozen=True)
class GenerationRequest:
    """One generation to produce: the k-th (``index``) output for ``sample_id`` from chat ``messages``."""

    sample_id: str
    index: int
    messages: tuple[Message, ...]
    seed: int

    @property
    def prompt_hash(self) -> str:
        return sha256_text("\x1e".join(f"{m.role}\x1f{m.content}" for m in self.messages))[:16]


def request_seed(base_seed: int, sample_id: str, index: int) -> int:
    """Per-request seed: independent of batching and order, distinct across samples and k."""
    return int(sha256_text(f"{base_seed}/{sample_id}/{index}")[:8], 16)


@dataclass(frozen=True)
class EngineContext:
    """What the CLI resolved for an engine: the model (name, config, checkpoint path) and options."""

    model_name: str
    model_spec: ModelSpec | None = None
    model_path: Path | None = None
    completions: Path | None = None
    device: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    sample_ids: frozenset[str] = frozenset()
    """Ids of every sample of the suite (before --limit): lets engines that read outputs produced
    elsewhere (replay) tell an unknown id from one that is merely outside the limit."""


@runtime_checkable
class Engine(Protocol):
    """What the runner needs from a backend engine.

    Optional class attributes: ``needs_checkpoint`` (default True; False for replay) and a method
    ``decoding_defaults() -> dict`` whose fields apply unless the user set them (replay: k).
    """

    name: str
    version: str

    def model_info(self) -> ModelInfo:
        """Identity of the model being evaluated; ``fingerprint`` keys the generation cache."""
        ...

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        """Check, before any generation, that the requests can be served (raise DareError otherwise)."""
        ...

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        """Generations for ``requests``, in order. Must not depend on how requests are batched."""
        ...
