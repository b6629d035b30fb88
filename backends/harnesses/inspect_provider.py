"""``DareAPI``: inspect_ai's ``dare`` provider, any DARE engine and decoder behind inspect's ``ModelAPI``.

    inspect eval task.py --model dare/tiny-sdar -M suite=sudoku -M remasking=low_confidence_dynamic

The model name after ``dare/`` is a DARE model name or alias; ``-M`` settings are dare-eval's ``--set``
spelling (see :mod:`.session`). inspect's GenerateConfig is the task's: ``max_tokens`` is the canvas
(``gen_length``), ``temperature``, ``top_p``, ``top_k`` and ``seed`` the fields of the same name, under the
user's own settings; ``stop_seqs`` cut the decoded text. The chat turns reach the engine as they are (DARE
applies the model's chat template); a request decodes with the seed of its messages' content. Decoding runs one
request at a time (``max_connections`` 1) in inspect's own thread: under inspect 0.3.285, loading the checkpoint's
tokenizer from a worker thread (``asyncio.to_thread``) failed inside transformers' lazy imports.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput
from inspect_ai.tool import ToolChoice, ToolInfo

from dare.harness.errors import ConfigError
from dare.harness.records import Message, sha256_text

from .session import Session, cut_at

#: GenerateConfig fields -> DecodingConfig fields of the same meaning
CONFIG_FIELDS = {"max_tokens": "gen_length", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
                 "seed": "seed"}


class DareAPI(ModelAPI):
    """inspect's ``ModelAPI`` over a :class:`~.session.Session` built from the model name and ``-M`` settings."""

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig | None = None, **model_args: Any):
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config or GenerateConfig())
        scoring = sorted(k for k in model_args if k == "likelihood" or k.startswith("likelihood."))
        if scoring:  # inspect only generates: a scoring estimator's setting would have no reader
            raise ConfigError([f"{k}: inspect's tasks generate; drop it (likelihood settings are for lm-eval's "
                               "loglikelihood tasks)" for k in scoring], source="-M")
        self.session = Session({"model": model_name, **model_args}, source="-M")

    def max_connections(self) -> int:
        return 1  # one engine in this process: requests decode one after another

    async def generate(self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice,
                       config: GenerateConfig) -> ModelOutput:
        if tools:
            raise ConfigError("DARE's models do not call tools; run a task without tools", source="dare provider")
        messages = [_message(m) for m in input]
        task = {field: getattr(config, key) for key, field in CONFIG_FIELDS.items() if getattr(config, key) is not None}
        run = self.session.decoding(task)
        sample_id = sha256_text("\x1e".join(f"{m.role}\x1f{m.content}" for m in messages))[:16]
        [generation] = self.session.generate([(sample_id, messages)], run)
        return ModelOutput.from_content(model=self.model_name, content=cut_at(generation.text, config.stop_seqs or []),
                                        stop_reason="stop" if generation.finish_reason == "stop" else "max_tokens")


def _message(message: ChatMessage) -> Message:
    if message.role not in ("system", "user", "assistant"):
        raise ConfigError(f"a {message.role} message has no place in a DARE prompt (no tool calls)",
                          source="dare provider")
    return Message(role=message.role, content=message.text)
