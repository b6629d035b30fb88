"""--engine verl never lets a non-finite update reach the workers' optimizers: every rank skips the same
update (the loss and gradient norm are all-reduced), the skip is counted in the metrics, too many in a row
stop the run with one line naming the step, and no checkpoint is written from a poisoned model."""

from __future__ import annotations

import json
import math
import os
import uuid
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("verl")

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from dare.backends.models.tiny import write_tiny_checkpoint  # noqa: E402
from dare.trainers.cli import main  # noqa: E402

from .nonfinite_algorithms import register  # noqa: E402
from .test_verl_bridge import STEPS, vowels_suite  # noqa: E402,F401  (a dense reward, scored on the driver)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def nan_cluster():
    """A local cluster whose workers register the poisoned algorithms at start-up, as the driver does."""
    os.environ.pop("RAY_ADDRESS", None)
    if ray.is_initialized():
        ray.shutdown()
    register()
    root = str(Path(__file__).resolve().parents[2])  # the workers import this test package from the checkout
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace=f"dare-test-{uuid.uuid4().hex[:8]}",
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                                      "PYTHONPATH": path},
                          "worker_process_setup_hook": f"{register.__module__}.register"})
    try:
        yield
    finally:
        ray.shutdown()


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_non_finite_update_on_the_workers_is_skipped_and_counted(nan_cluster, tmp_path,
                                                                   vowels_suite):  # noqa: F811  (the imported fixture)
    ckpt = write_tiny_checkpoint("llada", tmp_path / "llada", seed=5)
    args = ["--algo", "distributed/nan_first", "--model-path", str(ckpt), "--suite", vowels_suite, "--out",
            str(tmp_path), *STEPS, "--set", "algo.beta=0", "--engine", "verl", "--run-name", "skips"]
    assert main(args) == 0
    rows = _rows(tmp_path / "skips")
    assert [r["skipped_nonfinite"] for r in rows] == [1, 1]  # of 2 inner updates per step, the first was NaN
    assert all(math.isfinite(v) for r in rows for v in r.values() if isinstance(v, float))
    before = load_file(str(next(ckpt.glob("*.safetensors"))))
    after = load_file(str(next((tmp_path / "skips" / "checkpoints" / "step-000002").glob("*.safetensors"))))
    assert all(torch.isfinite(t).all() for t in after.values())
    assert max(float((after[k].float() - before[k].float()).abs().max()) for k in before) > 1e-3  # update 2 ran


def test_only_non_finite_updates_stop_the_run_with_one_line_and_no_checkpoint(nan_cluster, tmp_path, capsys):
    ckpt = write_tiny_checkpoint("llada", tmp_path / "llada", seed=5)
    args = ["--algo", "distributed/nan_always", "--model-path", str(ckpt), "--suite", "sudoku", "--out",
            str(tmp_path), *STEPS, "--set", "algo.beta=0", "--set", "algo.inner_steps=8", "--engine", "verl",
            "--run-name", "stops"]
    assert main(args) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dare-train: error")]
    assert len(err) == 1 and "step 1:" in err[0] and "non-finite" in err[0], err
    assert not list((tmp_path / "stops").glob("checkpoints/step-*"))
