"""lm-eval's ``dare`` model end to end: ``dare-lm-eval run --model dare`` on a local YAML task over DARE's
shipped Sudoku split (tests/harnesses/sudoku_task.py) decodes what ``dare-eval`` decodes, scores what it scores
and leaves a DARE run record; settings in lm-eval's ``--model_args`` are dare-eval's ``--set`` spelling."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("lm_eval")

from dare.backends.harnesses import lm_eval_cli  # noqa: E402
from dare.leaderboards.build import build_site  # noqa: E402

from .conftest import LIMIT, SETTINGS, read_run  # noqa: E402
from .sudoku_task import TASK, write_task  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm_eval")
    write_task(root, max_gen_toks=32)
    model_args = ",".join(["model=tiny-sdar", f"out={root / 'runs'}", *(f"{k}={v}" for k, v in SETTINGS.items())])
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    code = lm_eval_cli.main(["run", "--model", "dare", "--model_args", model_args, "--tasks", TASK,
                             "--include_path", str(root), "--limit", str(LIMIT), "--batch_size", "16",
                             "--output_path", str(root / "lm_eval_out")])
    assert code == 0
    [run_dir] = list((root / "runs").iterdir())
    return root, run_dir


def test_lm_eval_scores_what_dare_eval_scores_on_the_same_data_and_settings(runs, native_sudoku):
    lm, _ = read_run(runs[1])
    native, _ = native_sudoku
    assert lm.metrics[TASK]["accuracy"].value == native.metrics["sudoku"]["accuracy"].value == 0.75
    assert lm.metrics[TASK]["accuracy"].n == LIMIT
    assert lm.decoding.config_hash() == native.decoding.config_hash()
    assert lm.decoder == native.decoder and lm.model.fingerprint == native.model.fingerprint


def test_each_text_is_dare_eval_s_cut_at_the_task_s_stop_sequence(runs, native_sudoku):
    lm_rows = {int(r["id"]): r for r in read_run(runs[1])[1]}
    native_rows = native_sudoku[1]
    assert len(lm_rows) == len(native_rows) == LIMIT
    for i, row in enumerate(native_rows):
        assert lm_rows[i]["messages"] == row["messages"]  # the same prompt, template and all
        assert lm_rows[i]["completion"] == row["completion"].split("</answer>")[0]
    assert any("</answer>" in r["completion"] for r in native_rows)  # the stop sequence did cut something


def test_the_record_is_one_the_leaderboard_shows(runs, tmp_path):
    root, run_dir = runs
    record, rows = read_run(run_dir)
    assert record.suite == TASK and record.benchmarks[TASK].verifier == "lm-eval" and "lm-eval" in record.flags
    assert record.decoding.steps == 16 and {r["benchmark"] for r in rows} == {TASK}
    report = build_site([root / "runs"], tmp_path / "site")
    assert report.suites == {TASK: 1} and not report.skipped


@pytest.mark.extended
def test_a_bad_model_arg_is_one_line_and_exit_2(capsys, tmp_path):
    write_task(tmp_path, max_gen_toks=32)
    code = lm_eval_cli.main(["run", "--model", "dare", "--model_args",
                             f"model=tiny-sdar,out={tmp_path / 'runs'},extra.d3llm_entropy_threshold=0.5",
                             "--tasks", TASK, "--include_path", str(tmp_path), "--limit", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[-1] == ("dare-lm-eval: error: --model_args: extra.d3llm_entropy_threshold: unknown "
                                    "option (options: eos_gamma, max_steps_per_block, record_trajectory, "
                                    "step_schedule)")
