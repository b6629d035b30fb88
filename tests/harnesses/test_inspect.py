"""inspect_ai's ``dare`` provider end to end: ``inspect eval inspect_sudoku_task.py --model dare/tiny-sdar -M ...``
(found through the package's ``inspect_ai`` entry point) decodes and scores what dare-eval does on the same
puzzles and settings; ``-M`` takes dare-eval's ``--set`` spelling."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log  # noqa: E402

from .conftest import LIMIT, SETTINGS  # noqa: E402

HERE = Path(__file__).resolve().parent
INSPECT = str(Path(sys.executable).with_name("inspect"))


def _inspect_eval(folder: Path, *model_args: str) -> subprocess.CompletedProcess:
    shutil.copy(HERE / "inspect_sudoku_task.py", folder)
    args = [a for setting in model_args for a in ("-M", setting)]
    return subprocess.run([INSPECT, "eval", "inspect_sudoku_task.py", "--model", "dare/tiny-sdar", *args,
                           "-T", f"limit={LIMIT}", "--log-dir", str(folder / "logs"), "--display", "none"],
                          cwd=folder, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(folder)})


def test_inspect_eval_decodes_and_scores_what_dare_eval_does(tmp_path, native_sudoku):
    done = _inspect_eval(tmp_path, f"out={tmp_path / 'runs'}", *(f"{k}={v}" for k, v in SETTINGS.items()))
    assert done.returncode == 0, done.stderr[-2000:]
    [log_file] = list((tmp_path / "logs").iterdir())
    log = read_eval_log(str(log_file))
    native, native_rows = native_sudoku
    assert log.status == "success" and log.eval.model == "dare/tiny-sdar"
    assert log.results.scores[0].metrics["accuracy"].value == native.metrics["sudoku"]["accuracy"].value == 0.75
    texts = {str(s.id): s.output.completion for s in log.samples}
    assert texts == {row["id"]: row["completion"] for row in native_rows}


def test_a_bad_setting_stops_the_eval_naming_it(tmp_path):
    done = _inspect_eval(tmp_path, "extra.d3llm_entropy_threshold=0.5")
    # inspect's CLI prints its own traceback above; the error it ends with is DARE's one line
    assert done.returncode != 0 and done.stderr.splitlines()[-1] == (
        "dare.harness.errors.ConfigError: -M: extra.d3llm_entropy_threshold: unknown option (options: eos_gamma, "
        "max_steps_per_block, record_trajectory, step_schedule)")


def test_likelihood_settings_have_no_reader_in_inspect():
    from dare.backends.harnesses.inspect_provider import DareAPI
    from dare.harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^-M: likelihood.mode: inspect's tasks generate; drop it"):
        DareAPI("tiny-sdar", **{"likelihood.mode": "exact"})
