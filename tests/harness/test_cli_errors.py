"""The bad-input catalogue: every case is one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import pytest

from .helpers import dare_eval, write_completions


@pytest.fixture
def good_file(tmp_path):
    return write_completions(tmp_path / "c.jsonl", [("sudoku/test/0", "<answer>1</answer>")])


def cases(tmp_path, good_file):
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"id": "sudoku/test/0", "completion": "x"}\n{not json\n')
    wrong_types = tmp_path / "types.jsonl"
    wrong_types.write_text('{"id": "sudoku/test/0", "completion": 5}\n')
    unknown = write_completions(tmp_path / "unknown.jsonl", [("sudoku/test/0", "a"), ("nope/1", "b")])
    a_file = tmp_path / "file"
    a_file.write_text("")
    replay = ["--backend", "replay", "--suite", "sudoku"]
    return {
        "unknown model": (["--model", "no-such-model", "--suite", "sudoku"], "unknown model 'no-such-model'"),
        "unknown suite": ([*replay[:2], "--suite", "sudokku", "--completions", str(good_file)], "did you mean 'sudoku'"),
        "unknown backend": (["--backend", "nope", "--suite", "sudoku", "--model", "x"], "unknown engine 'nope'"),
        "unknown key": ([*replay, "--completions", str(good_file), "--set", "gen_lenght=5"], "did you mean gen_length"),
        "wrong type": ([*replay, "--completions", str(good_file), "--set", "steps=many"], "steps"),
        "indivisible blocks": ([*replay, "--completions", str(good_file), "--set", "gen_length=100", "--set", "block_length=32"], "not divisible"),
        "missing file": ([*replay, "--completions", str(tmp_path / "absent.jsonl")], "does not exist"),
        "malformed jsonl": ([*replay, "--completions", str(bad_json), "--limit", "1"], "line 2 is not JSON"),
        "wrong completion type": ([*replay, "--completions", str(wrong_types), "--limit", "1"], "'completion' must be a string"),
        "unknown ids": ([*replay, "--completions", str(unknown), "--limit", "1"], "nope/1"),
        "missing samples": ([*replay, "--completions", str(good_file), "--limit", "3"], "lacks completions for 2 sample"),
        "unwritable out": ([*replay, "--completions", str(good_file), "--limit", "1", "--out", str(a_file / "runs")], "not writable"),
        "bad limit": ([*replay, "--completions", str(good_file), "--limit", "0"], "--limit"),
        "no suite": (["--backend", "replay", "--completions", str(good_file)], "no suite"),
        "missing checkpoint": (["--model-path", str(tmp_path / "nowhere"), "--suite", "sudoku"], "not a directory"),
        "bad flag": (["--suite", "sudoku", "--frobnicate"], "unrecognized arguments"),
    }


CASE_NAMES = [
    "unknown model", "unknown suite", "unknown backend", "unknown key", "wrong type", "indivisible blocks",
    "missing file", "malformed jsonl", "wrong completion type", "unknown ids", "missing samples",
    "unwritable out", "bad limit", "no suite", "missing checkpoint", "bad flag",
]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_is_one_line_exit_2(name, tmp_path, good_file):
    args, expected = cases(tmp_path, good_file)[name]
    proc = dare_eval(*args, "--out", str(tmp_path / "runs")) if "--out" not in args else dare_eval(*args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert expected in lines[0], lines[0]
    assert proc.stdout == ""


def test_config_file_with_several_problems_reports_all(tmp_path, monkeypatch):
    from dare.harness import config
    from dare.harness.errors import ConfigError

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "broken.yaml").write_text("name: broken\narchitecture: 3\nmask_id: many\nbogus: 1\n")
    monkeypatch.setenv("DARE_CONFIG_PATH", str(tmp_path))
    config.catalog.cache_clear()
    config.model.cache_clear()
    try:
        with pytest.raises(ConfigError) as err:
            config.model("broken")
        assert len(err.value.problems) == 3, err.value.problems
        text = str(err.value)
        assert "architecture" in text and "mask_id" in text and "bogus" in text
    finally:
        config.catalog.cache_clear()
        config.model.cache_clear()


def test_help_documents_every_flag():
    proc = dare_eval("--help")
    assert proc.returncode == 0
    for flag in ["--model", "--model-path", "--suite", "--backend", "--completions", "--limit", "--seed", "--out",
                 "--set", "--cache-dir", "--device", "--unsafe-local-exec", "--list"]:
        assert flag in proc.stdout


def test_known_model_without_checkpoint_names_the_download(tmp_path):
    env = {"DARE_MODEL_DIR": str(tmp_path / "models"), "HF_HOME": str(tmp_path / "hf")}
    proc = dare_eval("--model", "sdar-8b-chat", "--suite", "gsm8k", "--out", str(tmp_path / "runs"), env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "huggingface-cli download JetLM/SDAR-8B-Chat" in proc.stderr
