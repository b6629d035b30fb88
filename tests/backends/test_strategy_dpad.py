"""DPad (mdm:dpad) against the authors' code, its options, its record and its refusals.

Fixture tests/backends/fixtures/dpad_official.json (regenerate with fixtures/scripts/make_dpad_fixture.py):
Crys-Chen/DPad ``llada/generate_dropout.py::generate`` (commit 461b36e229219d322f5439786ee504cc72046828,
samplers of llada/sampler.py, ``early_termination=False``) run with the shipped tiny-llada network with seeded
weight noise (tests/backends/strategy_model.py; float32, CPU) in place of their model, its positions set to
their ``q_indices``, on Sudoku prompts 0-2 (one call per prompt after ``torch.manual_seed(seed)``), greedy.
Settings: Gaussian dropout over the whole suffix and over a 16- and a 32-column window (with a 0.3
threshold), uniform dropout keeping 4 of 16; with their prefix and dual cache loops
(``generate_with_prefix_cache`` / ``generate_with_dual_cache``), Gaussian over 16 and uniform 8 of 32 with a
0.3 threshold. NFE is the forwards run (their count).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.backends.decoding.dpad import Dropout, gaussian_pdf
from dare.backends.decoding.fastdllm import cached_decoder
from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders
from tests.cli_here import dare_eval

from .strategy_model import noisy_tiny_llada

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

OFFICIAL = json.loads((Path(__file__).parent / "fixtures" / "dpad_official.json").read_text())
KEYS = ("dropout", "sigma", "scale", "window", "preserved_tokens", "threshold", "cache")
SETTINGS = list(dict.fromkeys(tuple(c[k] for k in KEYS) for c in OFFICIAL["cases"]))


@pytest.fixture(scope="module")
def llada():
    return noisy_tiny_llada()  # the fixtures' network (see strategy_model.py)


def _cases(setting):
    return [c for c in OFFICIAL["cases"] if tuple(c[k] for k in KEYS) == setting]


def _extra(setting):
    dropout, sigma, scale, window, keep, _, _ = setting
    extra = {"dpad_dropout": dropout, "dpad_window": window, "dpad_keep": keep}
    return extra if sigma is None else {**extra, "dpad_sigma": sigma, "dpad_scale": scale}


def _config(cases, name, extra, threshold=None):
    first = cases[0]
    return DecodingConfig(gen_length=first["gen_length"], steps=first["steps"], block_length=first["block_length"],
                          remasking=name.split(":")[1], threshold=threshold, extra=extra)


def _decode(model, name, cases, extra, threshold=None, cache="none"):
    cfg = _config(cases, name, extra, threshold)
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, model.mask_id, model.pad_id, "cpu")
    decode = decoders.get(name) if cache == "none" else cached_decoder(decoders.get(name), cache)
    with torch.inference_mode():
        return decode(model, canvas, cfg, [torch.Generator().manual_seed(c["seed"]) for c in cases])


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"{s[6]}-{s[0]}-w{s[3]}-th{s[5]}")
def test_tokens_and_nfe_equal_the_authors_code_batched(llada, setting):
    cases, cache = _cases(setting), setting[6]  # cache: their generate, or its prefix / dual cache loop
    ours = _decode(llada, "mdm:dpad", cases, _extra(setting), setting[5], cache)  # one left-padded batch of three rows
    assert ours.tokens.tolist() == [c["tokens"] for c in cases]
    assert ours.nfe.tolist() == [c["nfe"] for c in cases] == [c["forwards"] for c in cases]
    assert ours.nfe_official.tolist() == ours.nfe.tolist()  # their cached loops run no pass after a full block
    plain = _decode(llada, "mdm:low_confidence", cases, {}, setting[5], cache)  # the same canvas, nothing dropped
    assert all(p != c["tokens"] for p, c in zip(plain.tokens.tolist(), cases))  # every row: 10-17 of 64 tokens


def test_rows_are_decoded_alone_as_in_a_batch(llada):
    cases = _cases(SETTINGS[0])
    alone = _decode(llada, "mdm:dpad", cases[1:2], _extra(SETTINGS[0]))
    assert alone.tokens.tolist() == [cases[1]["tokens"]]


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s[6] == "none"], ids=lambda s: f"{s[0]}-w{s[3]}")
def test_kept_columns_follow_the_row_seed(llada, setting):
    cases = _cases(setting)  # each row's kept suffix columns per block, drawn from its own seed as theirs
    cfg = _config(cases, "mdm:dpad", _extra(setting), setting[5])
    canvas = Canvas.build([c["prompt_ids"] for c in cases], cfg.gen_length, llada.mask_id, llada.pad_id, "cpu")
    opts = decoders.get("mdm:dpad").options(cfg)
    state = Dropout(llada, canvas, cfg, opts, [torch.Generator().manual_seed(c["seed"]) for c in cases])
    per_block = []
    for b in range(cfg.gen_length // cfg.block_length):
        end = canvas.gen_start + (b + 1) * cfg.block_length
        index, valid = state.columns(end)
        suffix, keep = index[:, end:], valid[:, end:]
        per_block.append([(s[k] - canvas.gen_start).tolist() for s, k in zip(suffix, keep)])
    assert [[block[r] for block in per_block] for r in range(len(cases))] == [c["kept_suffix"] for c in cases]


def test_gaussian_keep_probability_by_hand():
    pdf = gaussian_pdf(5, 8, sigma=4.0, scale=2.0)  # x = 0, 1, 2, 3, 4; 2 * phi(x)
    expected = [0.797885, 0.483941, 0.107982, 0.008864, 0.000268, 0, 0, 0]
    assert pdf.tolist() == pytest.approx(expected, abs=1e-6)


def test_options_reads_and_record_key():
    decode = decoders.get("mdm:dpad")
    identity = decode.Options().identity()
    assert identity["dpad_dropout"] == "gaussian" and identity["dpad_sigma"] == 4.0 and identity["dpad_window"] is None
    assert {"cache", "cfg_scale"}.isdisjoint(decode.reads) and "threshold" in decode.reads
    assert decode.cacheable and decode.columns is not None  # the Fast-dLLM caches run over its columns
    assert "dream:dpad" not in decoders and "block:dpad" not in decoders


def test_bad_values_are_refused(llada):
    cases = OFFICIAL["cases"][:1]
    with pytest.raises(ConfigError, match="dpad_window"):
        _decode(llada, "mdm:dpad", cases, {"dpad_window": 65})


def _cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "dare.harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args,message", [
    (["--model", "tiny-dream", "--set", "remasking=dpad"], "not available for dream"),
    (["--model", "tiny-sdar", "--set", "remasking=dpad"], "not available for"),
    (["--model", "tiny-llada", "--set", "remasking=dpad", "--set", "extra={dpad_windw: 8}"],
     "did you mean 'dpad_window'"),
    (["--model", "tiny-llada", "--set", "remasking=dpad", "--set", "extra={dpad_dropout: cosine}"], "dpad_dropout"),
    (["--model", "tiny-llada", "--set", "remasking=dpad", "--set", "cfg_scale=1.0"], "cfg_scale"),
    (["--model", "tiny-llada", "--set", "remasking=dpad", "--set", "cache=dual"], "cache"),
    (["--model", "tiny-llada", "--engine", "fastdllm", "--set", "remasking=dpad", "--set", "cache=dkv"],
     "does not run over the column selection")])
def test_bad_combinations_are_one_line_rc_2(args, message):
    done = dare_eval(*args, "--suite", "sudoku", "--dry-run")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.extended
def test_recorded_and_keyed(tmp_path):
    base = ["--model", "tiny-llada", "--suite", "sudoku", "--limit", "1", "--set", "gen_length=32", "--set", "steps=32",
            "--set", "block_length=16", "--set", "remasking=dpad", "--cache-dir", str(tmp_path / "cache")]
    runs = {}
    for name, sets in [("a", ["extra={dpad_window: 16}"]), ("b", ["extra={dpad_window: 16}"]),
                       ("c", ["extra={dpad_window: 8}"]), ("d", ["extra={dpad_window: 16}", "cache=dual"])]:
        engine = ["--engine", "fastdllm"] if name == "d" else []
        done = _cli(*base, *engine, *(a for v in sets for a in ("--set", v)), "--out", str(tmp_path / name),
                    timeout=300)
        assert done.returncode == 0, done.stderr
        runs[name] = json.loads(next((tmp_path / name).rglob("run.json")).read_text())
    decoder = runs["a"]["decoder"]
    assert decoder["name"] == "mdm:dpad" and decoder["options"]["dpad_window"] == 16
    assert decoder["options"]["dpad_dropout"] == "gaussian" and "cache" not in runs["a"]["decoding_fields"]
    assert runs["b"]["counts"]["sudoku"]["cached"] == 1  # the same options: served from the cache
    assert runs["c"]["counts"]["sudoku"]["cached"] == 0  # another window: generated anew
    assert runs["c"]["decoding"]["config_hash"] != runs["a"]["decoding"]["config_hash"]
    assert runs["d"]["decoder"]["name"] == "fastdllm:mdm:dpad" and "cache" in runs["d"]["decoding_fields"]
    assert runs["d"]["counts"]["sudoku"]["cached"] == 0 and runs["d"]["decoding"]["cache"] == "dual"


def test_sampled_rows_do_not_depend_on_their_neighbours(llada):
    cases = _cases(SETTINGS[1])  # T > 0: sampling noise and dropout from each row's own seed
    cfg = _config(cases, "mdm:dpad", _extra(SETTINGS[1])).model_copy(update={"temperature": 0.8})

    def run(rows):
        canvas = Canvas.build([cases[r]["prompt_ids"] for r in rows], cfg.gen_length, llada.mask_id, llada.pad_id,
                              "cpu")
        with torch.inference_mode():
            gens = [torch.Generator().manual_seed(cases[r]["seed"]) for r in rows]
            return decoders.get("mdm:dpad")(llada, canvas, cfg, gens).tokens.tolist()

    batch, alone, swapped = run([0, 1, 2]), run([1]), run([2, 1])
    assert batch[1] == alone[0] == swapped[1] and batch[2] == swapped[0]
