"""Shared fixtures: tiny random checkpoints of every architecture, written once per test session."""

from __future__ import annotations

import pytest

from dare.backends.models.tiny import ARCHITECTURES, write_tiny_checkpoint


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("tiny_models")
    return {arch: write_tiny_checkpoint(arch, root / arch, seed=i) for i, arch in enumerate(ARCHITECTURES)}


@pytest.fixture(scope="session")
def tiny_models(tiny_dirs) -> dict:
    from dare.backends.models.loader import load_model

    return {arch: load_model(path) for arch, path in tiny_dirs.items()}


@pytest.fixture(scope="session", autouse=True)
def _single_thread():
    """Tiny models are dominated by threading overhead on shared CPUs; one thread is several times faster."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
