"""Tokenizer loading (no trust_remote_code) and chat-template rendering for dLLM checkpoints.

Checkpoints name custom tokenizer classes (``DreamTokenizer``, remote Qwen2 code); we never import those.
A ``tokenizer.json`` is loaded with ``PreTrainedTokenizerFast``; a ``vocab.json`` + ``merges.txt`` pair
with the Qwen2 byte-level BPE class. Special tokens and the chat template come from tokenizer_config.json.
"""

from __future__ import annotations

import logging
from pathlib import Path

from dare.harness.config import SHIPPED_CONFIGS
from dare.harness.errors import ModelError

log = logging.getLogger(__name__)


def load_tokenizer(path: Path):
    """The checkpoint's tokenizer with its special tokens and chat template (``tokenizer.chat_template``)."""
    from transformers import PreTrainedTokenizerFast

    if (path / "tokenizer.json").is_file():
        cls = PreTrainedTokenizerFast
    elif (path / "vocab.json").is_file() and (path / "merges.txt").is_file():
        cls = _qwen2_class()
    else:
        raise ModelError(f"no tokenizer in {path}: expected tokenizer.json or vocab.json + merges.txt "
                         "(copy them from the Hugging Face checkpoint)")
    try:
        # a concrete class, never AutoTokenizer: auto_map entries (remote code) are not followed
        tok = cls.from_pretrained(str(path))
    except (OSError, ValueError, TypeError) as exc:
        raise ModelError(f"cannot load the tokenizer in {path}: {exc}") from exc
    if not tok.chat_template and (path / "chat_template.jinja").is_file():
        tok.chat_template = (path / "chat_template.jinja").read_text()
    return tok


def _qwen2_class():
    """Qwen2's byte-level BPE class: ``Qwen2Tokenizer`` is the fast one in transformers 5, not in 4."""
    import transformers

    major = int(transformers.__version__.split(".")[0])
    return transformers.Qwen2Tokenizer if major >= 5 else transformers.Qwen2TokenizerFast


def use_chat_template(tok, spec) -> bool:
    """Whether prompts go through a chat template; installs the model config's own template file if it
    names one. Without a model config: the tokenizer's template when it has one (base checkpoints don't)."""
    if spec is None:
        return bool(tok.chat_template)
    if spec.chat_template == "none":
        return False
    if spec.chat_template != "tokenizer":
        path = Path(spec.chat_template)
        tok.chat_template = (path if path.is_absolute() else SHIPPED_CONFIGS / "models" / path).read_text()
    return True


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
