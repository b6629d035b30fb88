"""A user config directory for tests: benchmarks on the shipped Sudoku data graded by test verifiers,
found through DARE_CONFIG_PATH, with the config caches and the verifier registry restored afterwards."""

from __future__ import annotations

from contextlib import contextmanager

from dare.harness import config as hcfg
from dare.harness.registry import verifiers


def _clear_caches() -> None:
    for fn in (hcfg.catalog, hcfg.benchmark, hcfg.suite):
        fn.cache_clear()


@contextmanager
def user_benchmarks(tmp_path, monkeypatch, benchmarks: dict[str, tuple[str, type]]):
    """``benchmarks``: benchmark name -> (verifier name, Verifier class) to register for the block."""
    root = tmp_path / "configs"
    (root / "benchmarks").mkdir(parents=True)
    for name, (verifier, _) in benchmarks.items():
        (root / "benchmarks" / f"{name}.yaml").write_text(
            f"name: {name}\nversion: '1'\ndataset_version: 'test'\nfamily: planning\ndata: sudoku_test.jsonl\n"
            f"train: sudoku_train.jsonl\nprompt: dare_sudoku\nverifier: {verifier}\n")
    monkeypatch.setenv("DARE_CONFIG_PATH", str(root))
    saved = verifiers.snapshot()
    for verifier, cls in benchmarks.values():
        verifiers.register(verifier, cls)
    _clear_caches()
    try:
        yield root
    finally:
        verifiers.restore(saved)
        _clear_caches()
