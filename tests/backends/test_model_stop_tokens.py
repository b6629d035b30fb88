"""A model config's ``stop_tokens`` end an answer where its authors cut it.

DiffuCoder-7B-Instruct and -cpGRPO fill the canvas after the answer with ``<|dlm_pad|>`` and their authors keep
the text before the first one (apple/ml-diffucoder@f735e01 README.md and inference_demo.py:
``generations[0].split('<|dlm_pad|>')[0]``). The token is looked up by text in the checkpoint's tokenizer, so
here a tiny Dream checkpoint whose tokenizer has it stands in for the hub one.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from dare.backends.decoding.common import DecodeResult, LoopOptions
from dare.backends.engines.torch import TorchEngine
from dare.backends.models.tiny import write_tiny_checkpoint, write_tokenizer
from dare.harness import config
from dare.harness.engine import EngineContext, GenerationRequest
from dare.harness.errors import ModelError
from dare.harness.records import DecodingConfig, Message

PAD = "<|dlm_pad|>"
DREAM_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|beginoftext|>", "<|mask|>"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """tiny-dream's layout, its tokenizer with one more special token: DiffuCoder-Instruct's pad."""
    path = tmp_path_factory.mktemp("tiny-diffucoder")
    write_tiny_checkpoint("dream", path)
    tokenizer_config = json.loads((path / "tokenizer_config.json").read_text())
    roles = {k: tokenizer_config[k] for k in ("bos_token", "eos_token", "pad_token", "mask_token")}
    write_tokenizer(path, [*DREAM_SPECIALS, PAD], roles, tokenizer_config["chat_template"])
    return path


def _engine(path, stop_tokens: list[str]) -> TorchEngine:
    spec = config.model("tiny-dream").model_copy(update={"stop_tokens": stop_tokens, "path": None})
    return TorchEngine(EngineContext(model_name="tiny-diffucoder", model_spec=spec, model_path=path, device="cpu"))


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def _decode(engine: TorchEngine, canvas: list[int]):
    """The engine's output when its decoder leaves ``canvas`` (the cut and the text are the engine's)."""
    def spec(model, grid, decoding, gens, options):
        tokens = torch.tensor([canvas])
        return DecodeResult(tokens, torch.zeros_like(tokens), torch.zeros_like(tokens), torch.ones(1, dtype=torch.long))

    request = GenerationRequest(sample_id="s0", index=0, seed=0, messages=(Message(role="user", content="Hi"),))
    decoding = DecodingConfig(gen_length=len(canvas), steps=len(canvas), block_length=len(canvas),
                              remasking="entropy")
    [out] = engine.generate([request], decoding, decoder=SimpleNamespace(spec=spec), options=LoopOptions())
    return out


def test_a_completion_is_cut_at_the_model_config_stop_token(checkpoint):
    engine = _engine(checkpoint, [PAD])
    tok = engine.model.tokenizer
    pad = tok.convert_tokens_to_ids(PAD)
    canvas = _ids(tok, "print(1)") + [pad, pad] + _ids(tok, "junk")
    out = _decode(engine, canvas)
    assert pad in engine.model.stop_ids
    assert (out.text, out.finish_reason) == ("print(1)", "stop")


def test_without_it_the_text_after_the_pad_is_kept(checkpoint):
    """The contrast: the pad is a special token, dropped from the text, but what follows it stays."""
    engine = _engine(checkpoint, [])
    tok = engine.model.tokenizer
    pad = tok.convert_tokens_to_ids(PAD)
    canvas = _ids(tok, "print(1)") + [pad] + _ids(tok, "junk")
    assert _decode(engine, canvas).text == "print(1)junk"


def test_a_stop_token_the_tokenizer_lacks_is_an_error(checkpoint):
    with pytest.raises(ModelError, match="stop token '<\\|no_such\\|>'"):
        _ = _engine(checkpoint, ["<|no_such|>"]).model
