"""``python -m dare.backends.opencompass CONFIG.py``: OpenCompass's own CLI over DARE configs, failing loudly
where OpenCompass alone would exit 0 with empty scores."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opencompass")

from dare.harness.config import SHIPPED_CONFIGS  # noqa: E402

CONFIG_HEAD = 'dare = __import__("dare.backends.opencompass.configs", fromlist=["configs"])\n'


def run(config: Path, work_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dare.backends.opencompass", str(config), "-w", str(work_dir)],
                          capture_output=True, text=True, timeout=600, cwd=work_dir.parent)


def test_unimportable_model_module_exits_2_before_opencompass_starts(tmp_path):
    config = tmp_path / "eval_local.py"
    config.write_text(CONFIG_HEAD + 'datasets = dare.dare_datasets("countdown", limit=1)\n'
                      'models = [dict(type="my_local_dllm.MyModel", abbr="mine", path="x", '
                      'run_cfg=dict(num_gpus=0))]\n')
    proc = run(config, tmp_path / "outputs")
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert "'my_local_dllm.MyModel' cannot be imported by OpenCompass's task processes" in last
    assert not (tmp_path / "outputs").exists(), "OpenCompass must not have started"


@pytest.mark.slow
def test_shipped_config_runs_through_opencompass_cli(tmp_path):
    proc = run(SHIPPED_CONFIGS / "opencompass" / "eval_dare_planning_tiny.py", tmp_path / "outputs")
    assert proc.returncode == 0, proc.stderr[-3000:]
    [run_dir] = (tmp_path / "outputs").iterdir()
    results = sorted(p.name for p in (run_dir / "results" / "dare-torch-tiny-llada").iterdir())
    assert results == ["dare-countdown.json", "dare-sudoku.json"]
