"""Every benchmark declares the data release it scores (``dataset_version``) and every run records it.

A code score is only comparable with a paper's on the same release (MBPP+ v0.1.0 has 399 tasks, v0.2.0
378); the version is descriptive, the data sha256 still decides what was scored and keys the verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dare.harness import cli
from dare.harness import config as cfg
from dare.harness.config import BenchmarkSpec, load_yaml_model
from dare.harness.errors import ConfigError
from dare.harness.records import BenchmarkInfo, RunRecord, json_text

FIXTURES = Path(__file__).parent / "fixtures"
EVALPLUS = {"humanevalplus": "v0.1.10", "mbppplus": "v0.2.0", "mbppplus-v0.1.0": "v0.1.0"}


def test_every_shipped_benchmark_declares_its_dataset_version():
    versions = {name: cfg.benchmark(name).dataset_version for name in cfg.names("benchmarks")}
    assert all(versions.values()), versions
    assert {name: versions[name] for name in EVALPLUS} == EVALPLUS
    old = cfg.benchmark("mbppplus-v0.1.0")  # kept beside mbppplus, graded the same way
    assert old.data == "mbppplus_v0.1.0.jsonl" and old.verifier_args == cfg.benchmark("mbppplus").verifier_args
    assert cfg.suite("mbppplus-v0.1.0").benchmarks == ["mbppplus-v0.1.0"]


def test_a_benchmark_config_without_a_dataset_version_is_refused(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nversion: '1'\nfamily: math\ndata: gsm8k_test.jsonl\nprompt: raw\nverifier: math\n")
    with pytest.raises(ConfigError, match="dataset_version: Field required"):
        load_yaml_model(path, BenchmarkSpec)


def test_a_run_records_the_dataset_version_of_its_benchmark_and_a_dry_run_shows_it(capsys, tmp_path):
    completions = tmp_path / "sudoku.jsonl"
    completions.write_text(json.dumps({"id": "sudoku/test/0", "completion": "no idea"}) + "\n")
    args = ["--no-progress", "--backend", "replay", "--suite", "sudoku", "--completions", str(completions),
            "--limit", "1", "--out", str(tmp_path / "runs")]
    assert cli.main([*args, "--dry-run"]) == 0
    assert "sudoku: dataset version yjyddq/DARE sudoku_1\n" in capsys.readouterr().out
    code = cli.main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    record = json.loads((Path(out.out.strip().splitlines()[-1]) / "run.json").read_text())
    assert record["benchmarks"]["sudoku"]["dataset_version"] == cfg.benchmark("sudoku").dataset_version
    assert RunRecord.model_validate(record).benchmarks["sudoku"].dataset_version == "yjyddq/DARE sudoku_1"


def test_an_info_without_a_version_writes_no_key_and_one_with_it_round_trips():
    fields = dict(name="mbppplus", version="1", data_file="mbppplus.jsonl", data_sha256="a" * 64, n_total=378,
                  n_used=378, prompt_template="raw", prompt_template_hash="h", verifier="code", verifier_version="2")
    assert "dataset_version" not in BenchmarkInfo(**fields).model_dump(mode="json")
    info = BenchmarkInfo(**fields, dataset_version="v0.2.0")
    assert BenchmarkInfo.model_validate(info.model_dump(mode="json")) == info
    old = (FIXTURES / "records_v2" / "replay" / "run.json").read_text()  # written before dataset_version
    record = RunRecord.model_validate_json(old)
    assert all(b.dataset_version is None for b in record.benchmarks.values())
    assert json_text(record.to_json(), indent=2) + "\n" == old
