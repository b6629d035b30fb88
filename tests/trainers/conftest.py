"""Tiny random checkpoints for trainer tests (written once per session) and single-threaded torch."""

from __future__ import annotations

import pytest

from dare.backends.models.tiny import write_tiny_checkpoint


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("trainer_tiny")
    return {arch: write_tiny_checkpoint(arch, root / arch, seed=i) for i, arch in enumerate(("llada", "dream", "sdar"))}


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """Tiny models are dominated by threading overhead on shared CPUs."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
