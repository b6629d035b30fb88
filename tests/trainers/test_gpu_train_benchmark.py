"""benchmarks/gpu_train.py on the CPU at the tiny models' own shapes: the benchmark the GPU check runs on the 8B
shapes (tests/gpu/test_train_cuda.py) builds its weightless checkpoints, steps a masked and a block algorithm,
and reports each step."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from gpu_train import checkpoint, main, rl_algorithms  # noqa: E402


def test_every_rl_algorithm_is_benchmarked_and_new_ones_join():
    names = rl_algorithms()
    assert {"d1", "wd1", "gdsd", "rldf", "unigrpo", "d_treerpo", "dipo"} <= set(names)
    assert not {"sft", "dpo", "vrpo"} & set(names)


def test_8b_config_keeps_the_tokenizer_and_takes_the_shape(tmp_path):
    import json

    llada = json.loads((checkpoint("llada", "8b", tmp_path) / "config.json").read_text())
    assert (llada["d_model"], llada["n_layers"], llada["vocab_size"]) == (4096, 32, 126464)
    assert not list((tmp_path / "llada").glob("*.safetensors"))
    sdar = json.loads((checkpoint("sdar", "8b", tmp_path) / "config.json").read_text())
    assert (sdar["hidden_size"], sdar["num_hidden_layers"], sdar["num_key_value_heads"]) == (4096, 36, 8)


@pytest.mark.extended
def test_one_step_of_a_masked_and_a_block_algorithm_on_the_cpu():
    out = main(["--shape", "tiny", "--algorithms", "wd1,dipo", "--prompts", "1", "--group", "2", "--gen", "8",
                "--device", "cpu"])
    rows = out["algorithms"]
    assert rows["wd1"]["model"] == "llada" and rows["dipo"]["model"] == "sdar"
    for row in rows.values():
        assert "error" not in row and row["loss_finite"] and row["step_s"] > 0 and "update" in row["phases_s"]
