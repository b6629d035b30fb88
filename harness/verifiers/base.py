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

from ..options import Options, parse_options
from ..records import ComponentInfo, Sample, Verdict


class Verifier:
    """Base class: override :meth:`verify` (and :meth:`verify_batch` to parallelise)."""

    name: ClassVar[str] = "base"
    version: ClassVar[str] = "0"
    Options: ClassVar[type[Options] | None] = None
    """The typed options (unknown keys refused); None for a plugin that declares none (taken as given)."""

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

    def cache_identity(self) -> dict[str, Any]:
        """Facts beyond the options that verdicts depend on (the code verifier's time limits depend on the machine
        its references were timed on); part of the verdict cache key when not empty."""
        return {}

    def describe(self) -> dict[str, Any]:
        """Facts recorded in the run record (e.g. sandbox isolation layers)."""
        return {}

    def gold_completion(self, sample: Sample) -> str | None:
        """A completion that must score full marks (the reference answer rendered as an answer), or None."""
        return None

    def close(self) -> None:
        """Release pools and sandboxes."""


def verifier_options(cls: type[Verifier], values: dict[str, Any]) -> dict[str, Any]:
    """The options a verifier runs with: ``values`` validated into ``cls.Options`` with its defaults filled
    (unknown keys are a ConfigError with did-you-mean), or ``values`` as given for an undeclared plugin."""
    if cls.Options is None:
        return dict(values)
    return parse_options(cls.Options, values, "verifier").model_dump(mode="json")


def verifier_identity(cls: type[Verifier], options: dict[str, Any]) -> ComponentInfo:
    """(name, version, options that can change a verdict): what the verdict cache and the leaderboard key on."""
    skip = cls.Options.execution_only if cls.Options is not None else frozenset()
    return ComponentInfo(name=cls.name, version=cls.version,
                         options={k: v for k, v in options.items() if k not in skip})
