"""PC-Sampler's background tables: the shipped default, the builder, the tokenizer check, the record and cache key.

The tables live in backends/decoding/pc_background/ (provenance in its README.md); the builder is
``python -m dare.backends.decoding.pc_background.build``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dare.backends.decoding import pc_background
from dare.backends.decoding.common import Canvas
from dare.backends.decoding.pc_background import build
from dare.backends.models.tokenizer import load_tokenizer
from dare.harness.config import SHIPPED_CONFIGS
from dare.harness.data import manifest
from dare.harness.errors import ConfigError, DataError
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .strategy_model import noisy_tiny_llada

TABLES = pc_background.TABLES_DIR
FIXTURES = Path(__file__).parent / "fixtures"
HUB = Path(os.environ.get("DARE_HUB_CONFIGS") or Path(__file__).resolve().parents[3] / "shared" / "hub_configs")
BASE = ["remasking=pc_sampler", "gen_length=16", "steps=16", "block_length=16"]
#: shipped table -> the tokenizer directory it was counted with
SHIPPED = {"tiny-llada.json": SHIPPED_CONFIGS / "models" / "tiny-llada",
           "tiny-llada-long.json": SHIPPED_CONFIGS / "models" / "tiny-llada-long",
           "dream-v0-instruct-7b.json": HUB / "Dream-v0-Instruct-7B"}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _plan(tmp_path, *extra: str):
    from dare.harness.plan import plan

    return plan("tiny-llada", "sudoku", overrides=[*BASE, *extra], limit=1, out=tmp_path)


def test_default_run_on_tiny_llada_reads_and_records_the_shipped_table(tmp_path):
    from dare.harness.plan import evaluate

    run = _plan(tmp_path)
    evaluate(run)
    options = json.loads((run.run_dir / "run.json").read_text())["decoder"]["options"]
    assert options["pc_background"] == "shipped"
    assert options["pc_background_sha256"] == _sha256(TABLES / "tiny-llada.json")


def test_shipped_tables_are_the_declared_files_one_per_tokenizer():
    assert sorted(p.name for p in pc_background.shipped_tables().values()) == sorted(SHIPPED)
    for name in SHIPPED:
        table = json.loads((TABLES / name).read_text())
        assert table["format"] == pc_background.FORMAT and table["num_token"] == sum(table["p_baseline_dict"].values())
        assert [c["name"] for c in table["corpus"]] == list(build.SOURCES)
    listed = dict(reversed(line.split()) for line in build.MANIFEST.read_text().splitlines())
    assert [n for n in listed if not n.startswith("cpython-3.11.7-lib/")] == ["gsm8k_train/gsm8k_train.jsonl"]
    assert len(listed) == 168  # and the 167 top-level stdlib modules
    evaluation = {digest for name, digest in manifest().items() if "_train" not in name}
    assert evaluation and not evaluation & set(listed.values())  # no evaluation file, byte for byte


def test_builder_rebuilds_the_tiny_llada_table_byte_for_byte():
    shipped = (TABLES / "tiny-llada.json").read_bytes()
    table = json.loads(shipped)
    tok = load_tokenizer(SHIPPED["tiny-llada.json"])
    assert build.build(tok, table["tokenizer"], table["built"]) == shipped


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_builder_rebuilds_every_shipped_table_byte_for_byte(name):
    if not SHIPPED[name].is_dir():
        pytest.skip(f"no tokenizer at {SHIPPED[name]} (set DARE_HUB_CONFIGS)")
    shipped = (TABLES / name).read_bytes()
    table = json.loads(shipped)
    assert build.build(load_tokenizer(SHIPPED[name]), table["tokenizer"], table["built"]) == shipped


def test_builder_refuses_a_corpus_file_that_differs(tmp_path):
    stdlib = tmp_path / "Lib"
    stdlib.mkdir()
    (stdlib / "__future__.py").write_text("not CPython 3.11.7's\n")
    tok = load_tokenizer(SHIPPED["tiny-llada.json"])
    with pytest.raises(DataError, match="__future__.py differs from the declared corpus"):
        build.build(tok, "tiny-llada", "2026-12-02", stdlib)


def test_wrong_tokenizer_table_is_one_line_rc_2():
    dream_table = TABLES / "dream-v0-instruct-7b.json"
    done = subprocess.run([sys.executable, "-m", "dare.harness.cli", "--model", "tiny-llada", "--suite", "sudoku",
                           "--set", "remasking=pc_sampler", "--set", f"extra={{pc_background: {dream_table}}}",
                           "--dry-run"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "counted with another tokenizer" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_tables_without_a_tokenizer_hash_are_checked_by_id_and_shipped_needs_a_table(tmp_path):
    tiny = load_tokenizer(SHIPPED["tiny-llada.json"])
    past = tmp_path / "authors_format.json"
    past.write_text(json.dumps({"num_token": 10, "p_baseline_dict": {"3": 4, str(len(tiny)): 6}}))
    with pytest.raises(ConfigError, match=f"holds token id {len(tiny)}, past this model's vocabulary"):
        pc_background.resolve(str(past), tiny)
    assert pc_background.resolve(str(FIXTURES / "pc_sampler_background.json"), tiny).tokenizer_sha256 is None
    dream_tiny = load_tokenizer(SHIPPED_CONFIGS / "models" / "tiny-dream")  # no table ships for it
    with pytest.raises(ConfigError, match="ships no PC-Sampler background table.*pc_background.build"):
        pc_background.resolve("shipped", dream_tiny)
    assert pc_background.resolve("none", dream_tiny) is None


def test_the_table_changes_the_tokens_where_the_background_term_matters():
    """lambda = 0 (the authors' Sudoku setting): the ranking is min(-p log f, alpha) alone, so with ``none``
    (f = 1/V for every token) it is plain confidence order; the shipped table must reorder it."""
    model = noisy_tiny_llada()
    cases = json.loads((FIXTURES / "pc_sampler_official.json").read_text())["cases"]
    prompts = [c["prompt_ids"] for c in cases if c["block_length"] == 32][:3]

    def decode(background):
        cfg = DecodingConfig(gen_length=32, steps=32, block_length=32, remasking="pc_sampler",
                             extra={"pc_background": background, "pc_lambda": 0.0})
        canvas = Canvas.build(prompts, 32, model.mask_id, model.pad_id, "cpu")
        gens = [torch.Generator().manual_seed(0) for _ in prompts]
        with torch.inference_mode():
            return decoders.get("mdm:pc_sampler")(model, canvas, cfg, gens).tokens

    shipped, none = decode("shipped"), decode("none")
    assert not torch.equal(shipped, none)
    assert torch.equal(none, decode("none")) and torch.equal(shipped, decode(str(TABLES / "tiny-llada.json")))


def test_record_and_generation_key_carry_the_table(tmp_path):
    table = tmp_path / "copy.json"
    table.write_bytes((TABLES / "tiny-llada.json").read_bytes())
    keys = {name: _plan(tmp_path, *extra).generation_key() for name, extra in {
        "default": [], "shipped": ["extra={pc_background: shipped}"], "none": ["extra={pc_background: none}"],
        "copy": [f"extra={{pc_background: {table}}}"]}.items()}
    assert keys["default"].split("-")[0] != keys["shipped"].split("-")[0]  # the DecodingConfig hash sees extra
    assert len(set(keys.values())) == 4
    edited = json.loads(table.read_text())
    first = next(iter(edited["p_baseline_dict"]))
    edited["p_baseline_dict"][first] += 1
    edited["num_token"] += 1
    table.write_text(json.dumps(edited))
    again = _plan(tmp_path, f"extra={{pc_background: {table}}}")
    assert again.generation_key() != keys["copy"]  # same option value, another file: another cache
    assert again.decoder_options.pc_background_sha256 == _sha256(table)
    pinned = f"extra={{pc_background_sha256: {_sha256(TABLES / 'tiny-llada.json')}}}"
    assert _plan(tmp_path, pinned).decoder_options.pc_background_sha256 == _sha256(TABLES / "tiny-llada.json")
    with pytest.raises(ConfigError, match="is pinned"):
        _plan(tmp_path, f"extra={{pc_background: none, pc_background_sha256: {'a' * 64}}}")
