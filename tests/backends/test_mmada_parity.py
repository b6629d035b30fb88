"""MMaDA's text path against its authors' code: Gen-Verse/MMaDA's ``MMadaModelLM`` and the root generate.py's
``generate`` with the chat template its main() sets, on the shipped tiny-mmada (tests/backends/fixtures/
mmada_official.json and mmada_official_logits.safetensors, written by fixtures/scripts/make_mmada_fixture.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dare.backends.engines.torch import TorchEngine
from dare.backends.models.loader import detect_architecture, read_config
from dare.backends.models.tokenizer import render_prompt
from dare.harness import config
from dare.harness.engine import EngineContext
from dare.harness.records import Message

from . import llada_cases

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE = json.loads((FIXTURES / "mmada_official.json").read_text())
OFFICIAL = load_file(FIXTURES / "mmada_official_logits.safetensors")


@pytest.fixture(scope="module")
def engine():
    spec = config.model("tiny-mmada")
    return TorchEngine(EngineContext(model_name="tiny-mmada", model_spec=spec, device="cpu"))


def test_the_fixture_cites_its_source():
    src = FIXTURE["source"]
    assert (src["repo"], src["function"], src["model_class"]) == ("Gen-Verse/MMaDA", "generate", "MMadaModelLM")
    assert len(src["commit"]) == 40 and len(src["sha256"]) == 64 and len(src["model_sha256"]) == 64


def test_its_config_names_select_mmada_and_its_template_renders_the_authors_prompt(engine):
    assert detect_architecture(read_config(engine.path)).name == "mmada"
    for question, text, ids in zip(FIXTURE["questions"], FIXTURE["prompt_texts"], FIXTURE["prompt_ids"], strict=True):
        messages = (Message(role="user", content=question),)
        assert render_prompt(engine.model.tokenizer, [{"role": "user", "content": question}], True) == text
        assert engine.prompt_ids(messages) == ids
    assert engine.model.mask_id == FIXTURE["mask_id"]


def test_logits_equal_the_authors_network(engine):
    ids = torch.tensor([FIXTURE["logits_canvas"]])
    with torch.inference_mode():
        ours = engine.model.net(ids, torch.arange(ids.shape[1])[None])[0].float()
    assert torch.allclose(ours, OFFICIAL["tiny_fp32"], atol=1e-5, rtol=0)  # measured: 1.4e-6


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"gen{c['gen_length']}-block{c['block_length']}")
def test_low_confidence_tokens_and_nfe_equal_the_authors_generate(engine, case):
    for ids, tokens, nfe in zip(FIXTURE["prompt_ids"], case["tokens"], case["nfe"], strict=True):
        assert llada_cases.low_confidence(engine.model, ids, case) == (tokens, nfe)
