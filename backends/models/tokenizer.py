"""Tokenizer loading (no trust_remote_code) and chat-template rendering for dLLM checkpoints.

Checkpoints name custom tokenizer classes (``DreamTokenizer``, remote Qwen2 code); we never import those.
A ``tokenizer.json`` is loaded with ``PreTrainedTokenizerFast``; a ``vocab.json`` + ``merges.txt`` pair
with the Qwen2 byte-level BPE class. Special tokens and the chat template come from tokenizer_config.json.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from dare.harness.errors import ModelError

log = logging.getLogger(__name__)


def load_tokenizer(path: Path):
    """The checkpoint's tokenizer with its special tokens and chat template (``tokenizer.chat_template``)."""
    from transformers import PreTrainedTokenizerFast, Qwen2Tokenizer

    cfg_file = path / "tokenizer_config.json"
    cfg: dict[str, Any] = json.loads(cfg_file.read_text()) if cfg_file.is_file() else {}
    special = {k: _token_text(cfg.get(k)) for k in ("bos_token", "eos_token", "pad_token", "unk_token", "mask_token")}
    special = {k: v for k, v in special.items() if v}
    try:
        if (path / "tokenizer.json").is_file():
            tok = PreTrainedTokenizerFast(tokenizer_file=str(path / "tokenizer.json"), **special)
        elif (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
            tok = Qwen2Tokenizer(vocab_file=str(path / "vocab.json"), merges_file=str(path / "merges.txt"), **special)
            _add_listed_tokens(tok, path / "added_tokens.json")
        else:
            raise ModelError(f"no tokenizer in {path}: expected tokenizer.json or vocab.json + merges.txt "
                             "(copy them from the Hugging Face checkpoint)")
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load the tokenizer in {path}: {exc}") from exc
    template = cfg.get("chat_template")
    if template is None and (path / "chat_template.jinja").is_file():
        template = (path / "chat_template.jinja").read_text()
    tok.chat_template = template
    return tok


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):  # AddedToken serialised as {"content": ...}
        return value.get("content")
    return value


def _add_listed_tokens(tok, added_file: Path) -> None:
    """added_tokens.json pins special tokens to ids; add them in id order so the ids come out the same."""
    if not added_file.is_file():
        return
    added = json.loads(added_file.read_text())
    from tokenizers import AddedToken

    for text, _ in sorted(added.items(), key=lambda kv: kv[1]):
        if tok.convert_tokens_to_ids(text) in (None, tok.unk_token_id):
            tok.add_tokens([AddedToken(text, special=True, normalized=False)], special_tokens=True)
    wrong = {t: i for t, i in added.items() if tok.convert_tokens_to_ids(t) != i}
    if wrong:
        log.warning("added tokens got ids different from added_tokens.json: %s", list(wrong)[:5])


def render_prompt(tok, messages: list[dict[str, str]], use_template: bool) -> str:
    """Prompt text for chat ``messages``. A trailing assistant message is a prefix the model continues:
    it is rendered as a finished turn by the template, so we render the turns before it with the
    generation prompt and append its raw content."""
    prefix = ""
    if messages and messages[-1]["role"] == "assistant":
        prefix, messages = messages[-1]["content"], messages[:-1]
    if not use_template:
        return "\n\n".join(m["content"] for m in messages) + ("\n\n" + prefix if prefix and messages else prefix)
    if not tok.chat_template:
        raise ModelError("the tokenizer has no chat template; set chat_template: none in the model config "
                         "for base models, or add a template to tokenizer_config.json")
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + prefix
