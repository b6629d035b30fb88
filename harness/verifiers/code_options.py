"""The code verifier's typed options (its own module so the verifier's code stays apart from its settings)."""

from __future__ import annotations

from pydantic import Field

from ..options import Options


class CodeOptions(Options):
    """See :class:`~dare.harness.verifiers.code.CodeVerifier`. ``workers``, ``cache_dir`` and ``uid_base``
    are execution only: they cannot change a verdict."""

    execution_only = frozenset({"workers", "cache_dir", "uid_base"})
    dataset: str
    unsafe_local_exec: bool = False
    workers: int | None = None
    min_time_limit: float = 1.0
    time_limit_factor: float = 4.0
    time_limit_margin: float = Field(1.0, gt=0, description="x every time limit; 1.0 applies EvalPlus's as they are")
    sample_time_limit: float = 60.0
    load_time_limit: float = 5.0
    memory_mb: int = 2048
    cache_dir: str | None = None
    uid_base: int = 61000
    fresh_sandbox_per_sample: bool = False
