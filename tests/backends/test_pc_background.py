"""PC-Sampler's background tables: the declared default (shipped, or built at plan time into the cache
directory), the builder, the tokenizer check, the record and cache key.

The tables live in backends/decoding/pc_background/ (provenance in its README.md); the builder is
``python -m dare.backends.decoding.pc_background.build``.
"""

from __future__ import annotations

import hashlib
import json
import logging
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

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

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
    assert options["pc_background"] == "declared"
    assert options["pc_background_sha256"] == _sha256(TABLES / "tiny-llada.json")
    assert not (tmp_path / ".cache" / pc_background.CACHE_FOLDER).exists()  # a shipped table is not rebuilt


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


@pytest.fixture
def nothing_shipped(monkeypatch):
    """DARE ships no table for any tokenizer (as for LLaDA-8B's), and build.count runs once per tokenizer: the
    one real count of the declared corpus (about 12 s for tiny-llada) serves every build of the test."""
    monkeypatch.setattr(pc_background, "shipped_tables", dict)
    monkeypatch.setattr(pc_background, "_BUILT", {})
    counted, real = {}, build.count

    def count(tok, stdlib=None):
        key = (pc_background.tokenizer_sha256(tok), stdlib)
        if key not in counted:
            counted[key] = real(tok, stdlib)
        return counted[key]

    monkeypatch.setattr(build, "count", count)
    pc_background.frequencies.cache_clear()
    yield counted
    pc_background.frequencies.cache_clear()


@pytest.mark.extended
def test_a_tokenizer_without_a_shipped_table_gets_it_built_once_at_plan_time(tmp_path, nothing_shipped, monkeypatch,
                                                                              caplog):
    """The first run builds the declared corpus's table into its cache directory (one INFO line), records its
    sha256 and decodes with it; the second reuses the file. The file is build.py's, byte for byte, and the
    count behind it rebuilds the shipped table byte for byte."""
    from dare.harness.plan import evaluate

    builds, real_build = [], build.build
    monkeypatch.setattr(build, "build", lambda *args, **kw: builds.append(args[1:]) or real_build(*args, **kw))
    tok = load_tokenizer(SHIPPED["tiny-llada.json"])
    digest = pc_background.tokenizer_sha256(tok)
    built = tmp_path / ".cache" / pc_background.CACHE_FOLDER / build.cache_name(digest)
    with caplog.at_level(logging.INFO, logger=pc_background.__name__):
        first = _plan(tmp_path)
    assert builds == [(build.run_label(digest), build.RUN_BUILT)] and built.is_file()
    said = [r.getMessage() for r in caplog.records if "built the background table" in r.getMessage()]
    assert len(said) == 1 and str(built) in said[0] and _sha256(built) in said[0]
    evaluate(first)
    options = json.loads((first.run_dir / "run.json").read_text())["decoder"]["options"]
    assert options["pc_background"] == "declared" and options["pc_background_sha256"] == _sha256(built)
    assert _sha256(built) != _sha256(TABLES / "tiny-llada.json")  # its own label and date: another file

    stamp = built.stat().st_mtime_ns
    monkeypatch.setattr(pc_background, "_BUILT", {})  # as in a new process
    second = _plan(tmp_path)
    assert len(builds) == 1 and built.stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert second.decoder_options.pc_background_sha256 == _sha256(built)
    assert second.generation_key() == first.generation_key()

    out = tmp_path / "by_build_py.json"
    label, date = json.loads(built.read_text())["tokenizer"], json.loads(built.read_text())["built"]
    assert build.main(["--tokenizer", str(SHIPPED["tiny-llada.json"]), "--label", label, "--date", date,
                       "--out", str(out)]) == 0
    assert out.read_bytes() == built.read_bytes()
    shipped = (TABLES / "tiny-llada.json").read_bytes()
    table = json.loads(shipped)
    assert build.build(tok, table["tokenizer"], table["built"]) == shipped
    assert len(nothing_shipped) == 1  # one count of the corpus in all


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


def test_tables_without_a_tokenizer_hash_are_checked_by_id(tmp_path):
    tiny = load_tokenizer(SHIPPED["tiny-llada.json"])
    past = tmp_path / "authors_format.json"
    past.write_text(json.dumps({"num_token": 10, "p_baseline_dict": {"3": 4, str(len(tiny)): 6}}))
    with pytest.raises(ConfigError, match=f"holds token id {len(tiny)}, past this model's vocabulary"):
        pc_background.resolve(str(past), tiny)
    assert pc_background.resolve(str(FIXTURES / "pc_sampler_background.json"), tiny).tokenizer_sha256 is None
    assert pc_background.resolve("none", tiny) is None


def test_declared_without_a_readable_corpus_is_one_line_naming_the_fixes(tmp_path, monkeypatch):
    """A tokenizer without a shipped table, on a Python whose Lib/ is not CPython 3.11.7's: nothing is built."""
    stdlib = tmp_path / "Lib"
    stdlib.mkdir()
    (stdlib / "__future__.py").write_text("not CPython 3.11.7's\n")
    monkeypatch.setattr(build, "_roots", lambda _: {"gsm8k_train": build.DATA_DIR, "cpython-3.11.7-lib": stdlib})
    dream_tiny = load_tokenizer(SHIPPED_CONFIGS / "models" / "tiny-dream")  # no table ships for it
    with pytest.raises(ConfigError) as raised:
        pc_background.resolve("declared", dream_tiny, tmp_path / "cache")
    message = str(raised.value)
    assert "\n" not in message and "__future__.py differs from the declared corpus" in message
    assert "pc_background: none" in message and "pc_background.build --tokenizer" in message
    assert not (tmp_path / "cache").exists()


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

    shipped, none = decode("declared"), decode("none")
    assert not torch.equal(shipped, none)
    assert torch.equal(none, decode("none")) and torch.equal(shipped, decode(str(TABLES / "tiny-llada.json")))


def test_record_and_generation_key_carry_the_table(tmp_path):
    table = tmp_path / "copy.json"
    table.write_bytes((TABLES / "tiny-llada.json").read_bytes())
    keys = {name: _plan(tmp_path, *extra).generation_key() for name, extra in {
        "default": [], "declared": ["extra={pc_background: declared}"], "none": ["extra={pc_background: none}"],
        "copy": [f"extra={{pc_background: {table}}}"]}.items()}
    assert keys["default"].split("-")[0] != keys["declared"].split("-")[0]  # the DecodingConfig hash sees extra
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
