"""The tokenizer of the shipped trained tiny models: a BPE trained on the planning prompts that compresses
the fixed templates, keeps digits one per token and round-trips text exactly."""

from __future__ import annotations

import json

from transformers import PreTrainedTokenizerFast

from dare.backends.models.tiny import write_tiny_checkpoint
from dare.backends.models.tiny_planning import planning_corpus

PUZZLE = "Solve the following Sudoku puzzle: 0321003004002100"


def test_trained_tokenizer_compresses_templates_and_splits_digits(tmp_path):
    corpus = list(planning_corpus(rows_per_benchmark=40))
    path = write_tiny_checkpoint("llada", tmp_path / "m", tokenizer_corpus=corpus, tokenizer_vocab=1024)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(path / "tokenizer.json"))
    prompt = corpus[1]
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    assert len(ids) < len(prompt.encode()) / 8  # the ~700-byte template becomes a few dozen tokens
    assert tok.decode(ids) == prompt
    digits = tok.convert_ids_to_tokens(tok("4321123434122143", add_special_tokens=False)["input_ids"])
    assert digits == list("4321123434122143")
    config = json.loads((path / "config.json").read_text())
    assert config["vocab_size"] % 64 == 0 and config["vocab_size"] >= len(tok)
    assert tok.convert_tokens_to_ids("<|mdm_mask|>") == config["mask_token_id"]
    assert PUZZLE[-16:] in tok.decode(tok(PUZZLE, add_special_tokens=False)["input_ids"])
