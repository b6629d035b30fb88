"""The verifier contract: ``(sample, completion) -> Verdict``, shared by evaluation and RL rewards.

A verifier is a class registered in ``registry.verifiers``; it is built with the benchmark's
``verifier_args`` and exposes ``version`` (bump it whenever a verdict could change: the harness then
re-scores cached generations without regenerating) and :meth:`Verifier.verify_batch`, which may use a
process pool. Calling an instance grades a completion; :meth:`Verifier.reward` turns the verdict into
the RL reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..records import Sample, Verdict


class Verifier:
    """Base class: override :meth:`verify` (and :meth:`verify_batch` to parallelise)."""

    name: ClassVar[str] = "base"
    version: ClassVar[str] = "0"

    def __init__(self, **options: Any):
        self.options = options

    def verify(self, sample: Sample, completion: str) -> Verdict:
        raise NotImplementedError

    def verify_batch(self, items: Sequence[tuple[Sample, str]]) -> list[Verdict]:
        """Verdicts for many (sample, completion) pairs, in order."""
        return [self.verify(s, c) for s, c in items]

    def __call__(self, sample: Sample, completion: str) -> Verdict:
        return self.verify(sample, completion)

    def reward(self, verdict: Verdict) -> float:
        """The RL reward of ``verdict`` under the task's published reward rule (d1's and DARE's); the evaluation
        keeps reporting ``score``. Default: the score itself."""
        return verdict.score

    def use_cache_dir(self, root: Path) -> None:
        """Where the run keeps derived data (its cache directory); verifiers that cache may use it."""

    def describe(self) -> dict[str, Any]:
        """Facts recorded in the run record (e.g. sandbox isolation layers)."""
        return {}

    def gold_completion(self, sample: Sample) -> str | None:
        """A completion that must score full marks (the reference answer rendered as an answer), or None."""
        return None

    def close(self) -> None:
        """Release pools and sandboxes."""
