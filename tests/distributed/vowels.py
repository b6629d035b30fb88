"""A dense reward on random text for the verl tests: the share of vowels in a completion (rewards run on the
driver), and the user benchmark that grades the shipped Sudoku data with it."""

from __future__ import annotations

from contextlib import contextmanager

from dare.harness.records import Verdict
from dare.harness.verifiers.base import Verifier

from ..user_configs import user_benchmarks


class VowelShare(Verifier):
    """Reward = share of vowels in the completion."""

    name, version = "vowel_share", "1"

    def verify(self, sample, completion):
        share = sum(c in "aeiouAEIOU" for c in completion) / max(len(completion), 1)
        return Verdict(score=share, passed=share > 0.2)


@contextmanager
def vowel_benchmarks(tmp_path, monkeypatch, more: dict[str, tuple[str, type]] | None = None):
    """Benchmark ``vowels`` (and ``more``: name -> (verifier name, class)) registered for the block."""
    with user_benchmarks(tmp_path, monkeypatch, {"vowels": ("vowel_share", VowelShare), **(more or {})}) as root:
        yield root
