"""The bad-input catalogue: every case is one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
import torch

from dare.harness import config as hcfg

from .helpers import dare_eval, write_completions

TINY_LLADA = hcfg.SHIPPED_CONFIGS / "models" / "tiny-llada"


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
        "unknown suite": ([*replay[:2], "--suite", "sudokku", "--completions", str(good_file)],
                          "did you mean 'sudoku'"),
        "unknown backend": (["--backend", "nope", "--suite", "sudoku", "--model", "x"], "unknown engine 'nope'"),
        "unknown key": ([*replay, "--completions", str(good_file), "--set", "gen_lenght=5"], "did you mean gen_length"),
        "wrong type": ([*replay, "--completions", str(good_file), "--set", "steps=many"], "steps"),
        "indivisible blocks": ([*replay, "--completions", str(good_file), "--set", "gen_length=100",
                                "--set", "block_length=32"], "not divisible"),
        "missing file": ([*replay, "--completions", str(tmp_path / "absent.jsonl")], "does not exist"),
        "malformed jsonl": ([*replay, "--completions", str(bad_json), "--limit", "1"], "line 2 is not JSON"),
        "wrong completion type": ([*replay, "--completions", str(wrong_types), "--limit", "1"],
                                  "'completion' must be a string"),
        "unknown ids": ([*replay, "--completions", str(unknown), "--limit", "1"], "nope/1"),
        "missing samples": ([*replay, "--completions", str(good_file), "--limit", "3"],
                            "lacks completions for 2 sample"),
        "unwritable out": ([*replay, "--completions", str(good_file), "--limit", "1", "--out", str(a_file / "runs")],
                           "is a file; pass a directory as --out"),
        "bad limit": ([*replay, "--completions", str(good_file), "--limit", "0"], "--limit"),
        "no suite": (["--backend", "replay", "--completions", str(good_file)], "no suite"),
        "missing checkpoint": (["--model-path", str(tmp_path / "nowhere"), "--suite", "sudoku"], "not a directory"),
        "bad flag": (["--suite", "sudoku", "--frobnicate"], "unrecognized arguments"),
        "truncated safetensors": (["--model", "tiny-llada", "--model-path", str(truncated_checkpoint(tmp_path)),
                                   "--suite", "sudoku", "--limit", "1"], "truncated or corrupt, download it again"),
        "cuda without cuda": (["--model", "tiny-llada", "--suite", "sudoku", "--limit", "1", "--device", "cuda"],
                              "no CUDA device is available"),
        "misspelt device": (["--model", "tiny-llada", "--suite", "sudoku", "--device", "cdua"],
                            "is not a torch device"),
    }


def truncated_checkpoint(tmp_path):
    """The shipped tiny-llada with its weights cut in half (an interrupted download)."""
    ckpt = tmp_path / "truncated"
    if not ckpt.is_dir():
        shutil.copytree(TINY_LLADA, ckpt)
        data = (ckpt / "model.safetensors").read_bytes()
        (ckpt / "model.safetensors").write_bytes(data[: len(data) // 2])
    return ckpt


CASE_NAMES = [
    "unknown model", "unknown suite", "unknown backend", "unknown key", "wrong type", "indivisible blocks",
    "missing file", "malformed jsonl", "wrong completion type", "unknown ids", "missing samples",
    "unwritable out", "bad limit", "no suite", "missing checkpoint", "bad flag", "truncated safetensors",
    "cuda without cuda", "misspelt device",
]


@pytest.mark.parametrize("name", CASE_NAMES)
def test_bad_input_is_one_line_exit_2(name, tmp_path, good_file):
    if name == "cuda without cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
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
    proc = dare_eval("--model", "sdar-8b", "--suite", "math", "--out", str(tmp_path / "runs"), env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    # the CLI huggingface_hub installs is `hf`; the alias resolved to its config's name
    assert f"weights not found for model 'sdar-8b-chat'; download with `hf download JetLM/SDAR-8B-Chat --local-dir " \
           f"{tmp_path / 'models'}/sdar-8b-chat`" in proc.stderr.replace("$DARE_MODEL_DIR", str(tmp_path / "models"))
    assert "huggingface-cli" not in proc.stderr


ALIASES = {"sdar-1.7b": "sdar-1.7b-chat", "sdar-4b": "sdar-4b-chat", "sdar-8b": "sdar-8b-chat",
           "sdar-30b": "sdar-30b-a3b-chat", "llada-8b": "llada-8b-instruct", "llada-1.5-8b": "llada-1.5",
           "dream-7b": "dream-v0-instruct-7b", "llada2-mini": "llada2.0-mini", "llada2.1": "llada2.1-mini"}


def test_short_aliases_resolve_to_one_config_each():
    for alias, name in ALIASES.items():
        assert hcfg.model(alias).name == name, alias
    aliases = hcfg.model_aliases()
    every = [a for n in hcfg.names("models") for a in hcfg.model(n).aliases]
    assert len(every) == len(set(every)), "an alias names two configs"
    assert not set(every) & set(hcfg.names("models")), "an alias shadows a config name"
    assert set(ALIASES) <= set(aliases)
    with pytest.raises(hcfg.RegistryError, match="did you mean 'sdar-8b'"):
        hcfg.model("sdar8b")


def test_version_and_list_show_decoding_and_id_formats():
    from dare import __version__

    proc = dare_eval("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"dare-eval {__version__}"
    out = dare_eval("--list").stdout
    assert "  olympiadbench [e.g. olympiadbench/1606]" in out and "  gsm8k [e.g. gsm8k/test/0]" in out
    assert "  sdar-8b-chat [sdar-8b]" in out
    # llada-8b-instruct: math runs with the model's default; math500 alone with its own entry (LLaDA EVAL.md)
    line = next(line for line in out.splitlines()
                if line.startswith("    math: gen_length=256 steps=256 block_length=32")
                and "math500: gen_length=512 steps=512 block_length=64" in line)
    assert "remasking=low_confidence" in line


# ---- dare-train ----------------------------------------------------------------------------------------

def dare_train(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dare.trainers.cli", "--no-progress", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=600)


def train_cases(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("")
    base = ["--algo", "d1", "--model", "tiny-llada", "--suite", "sudoku", "--steps", "1", "--out", str(tmp_path / "t")]
    return {
        "out is a file": ([*base, "--out", str(a_file)], f"{a_file} is a file; pass a directory as --out"),
        "misspelt setting": ([*base, "--set", "lrr=1e-4"], "unknown setting 'lrr'; did you mean 'lr'"),
        "algo alone": (["--algo", "mdpo"], "missing --suite NAME, --model NAME or --model-path DIR"),
        "cuda without cuda": ([*base, "--device", "cuda"], "no CUDA device is available"),
        "verl without ray": ([*base, "--engine", "verl"], "--engine verl needs ray (the rl extra"),
    }


@pytest.mark.parametrize("name", ["out is a file", "misspelt setting", "algo alone", "cuda without cuda",
                                  "verl without ray"])
def test_dare_train_bad_input_is_one_line_exit_2(name, tmp_path):
    if name == "cuda without cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    if name == "verl without ray" and importlib.util.find_spec("ray") is not None:
        pytest.skip("Ray is installed here")
    args, expected = train_cases(tmp_path)[name]
    proc = dare_train(*args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert expected in lines[0], lines[0]


def test_dare_train_version():
    from dare import __version__

    assert dare_train("--version").stdout.strip() == f"dare-train {__version__}"
