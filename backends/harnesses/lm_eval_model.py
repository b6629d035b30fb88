"""``DareLM``: lm-eval's ``dare`` model, any DARE engine and decoder behind lm-eval's ``LM`` API.

    dare-lm-eval run --model dare --model_args model=tiny-sdar,suite=sudoku,remasking=low_confidence_dynamic \\
        --tasks my_task --include_path tasks/

``--model_args`` are dare-eval's settings in its own KEY=VALUE spelling (see :mod:`.session`). A request's
``generation_kwargs`` are the task's settings: ``max_gen_toks`` is the canvas (``gen_length``), ``temperature``
(``do_sample: false`` meaning 0), ``top_p`` and ``top_k`` the fields of the same name, under the user's own
settings; ``until`` cuts the decoded text at the first stop sequence. The context is the user turn of a chat
(DARE applies the model's chat template, as dare-eval does), and each document decodes with the seed dare-eval
gives the same row (its ``id`` field; ``task/doc_id`` for a document without one). lm-eval's ``--device``
(default ``cuda:0`` on any machine) is not read: ``device=`` in ``--model_args`` is; its ``--batch_size`` is
DARE's execution-only ``batch_size`` unless the model args set one (LLaDA's own class reads it as the Monte-Carlo
batch, which here is ``likelihood.batch``: a warning says so when a size above lm-eval's default of 1 differs).
``loglikelihood`` and ``loglikelihood_rolling`` requests are scored by the engine's estimator (the model family's
unless ``likelihood=NAME``; options as ``likelihood.OPTION``), on the raw context, no chat template.
"""

from __future__ import annotations

import logging
from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from dare.harness.errors import ConfigError
from dare.harness.records import Message

from .session import Session, cut_at

log = logging.getLogger(__name__)

#: lm-eval generation_kwargs -> DecodingConfig fields of the same meaning
GEN_FIELDS = {"max_gen_toks": "gen_length", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}
#: read here, not decoding fields
GEN_READ = {"until", "do_sample"}


def task_settings(gen_kwargs: dict[str, Any]) -> dict[str, Any]:
    """A task's ``generation_kwargs`` as DecodingConfig fields (the keys DARE has no meaning for are logged)."""
    out = {field: gen_kwargs[key] for key, field in GEN_FIELDS.items() if gen_kwargs.get(key) is not None}
    if gen_kwargs.get("do_sample") is False:
        out["temperature"] = 0.0
    ignored = sorted(set(gen_kwargs) - set(GEN_FIELDS) - GEN_READ)
    if ignored:
        log.warning("dare: generation_kwargs %s have no DARE meaning and are not read", ", ".join(ignored))
    return out


def stops(gen_kwargs: dict[str, Any]) -> list[str]:
    until = gen_kwargs.get("until") or []
    return [until] if isinstance(until, str) else list(until)


def model_settings(model_args: dict[str, Any], batch_size: Any = None) -> dict[str, Any]:
    """``--model_args`` with lm-eval's ``--batch_size`` as DARE's (when an integer and not set in the args)."""
    settings = dict(model_args)
    if "batch_size" not in settings and str(batch_size).isdigit():
        settings["batch_size"] = int(batch_size)
    return settings


def _sample(request) -> tuple[str, int]:
    """(sample id, index) a request is seeded by: the document's own ``id`` where it has one (DARE's data rows
    do: then lm-eval and dare-eval draw the same Monte-Carlo samples for a question), else ``task/doc_id``;
    the index is lm-eval's request index (the choice)."""
    doc = request.doc if isinstance(request.doc, dict) else {}
    sample_id = doc.get("id")
    return (str(sample_id) if sample_id is not None else f"{request.task_name}/{request.doc_id}"), request.idx


@register_model("dare")
class DareLM(LM):
    """lm-eval's ``LM`` over a :class:`~.session.Session` built from ``--model_args``."""

    def __init__(self, batch_size: Any = None, max_batch_size: Any = None, device: Any = None, **model_args: Any):
        super().__init__()
        self.session = Session(model_settings(model_args, batch_size), source="--model_args")
        # lm-eval passes --batch_size 1 when none is given, so only a larger one reads as a Monte-Carlo batch meant
        self._lm_eval_batch = int(batch_size) if str(batch_size).isdigit() and int(batch_size) > 1 else None

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Texts for ``(context, generation_kwargs)`` requests, in order; requests with the same task settings
        decode together under one resolved DecodingConfig."""
        groups: dict[str, list[int]] = {}
        settings = [task_settings(dict(r.args[1] or {})) for r in requests]
        for i, task in enumerate(settings):
            groups.setdefault(repr(sorted(task.items())), []).append(i)
        texts: list[str | None] = [None] * len(requests)
        for members in groups.values():
            run = self.session.decoding(settings[members[0]])
            prompts = [(_sample(requests[i])[0], [Message(role="user", content=requests[i].args[0])])
                       for i in members]
            for i, generation in zip(members, self.session.generate(prompts, run)):
                texts[i] = cut_at(generation.text, stops(dict(requests[i].args[1] or {})))
                self.cache_hook.add_partial("generate_until", requests[i].args, texts[i])
        return [t or "" for t in texts]

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """``(log p(continuation | context), is_greedy)`` per request, by the session's scoring estimator, each
        seeded as dare-eval seeds the same question's choice (:func:`_sample`)."""
        self._note_mc_batch()
        results = self.session.score([(*_sample(r), r.args[0], r.args[1]) for r in requests])
        return [(r.logprob, r.is_greedy) for r in results]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """The whole text's log-likelihood where the estimator has one (else a one-line refusal)."""
        self._note_mc_batch()
        results = self.session.score([(*_sample(r), "", r.args[0]) for r in requests], rolling=True)
        return [r.logprob for r in results]

    def _note_mc_batch(self) -> None:
        """LLaDA's own lm-eval class reads ``--batch_size`` as its Monte-Carlo batch (their recipe: 8); here it is
        the execution batch, so a user copying their command is told which batch the estimate uses."""
        if self._lm_eval_batch is None:
            return
        mc_batch = getattr(self.session.estimator().options, "batch", None)
        if mc_batch is not None and mc_batch != self._lm_eval_batch:
            log.warning("dare: lm-eval's --batch_size %s is DARE's execution batch (no value depends on it); the "
                        "Monte-Carlo batch is likelihood.batch=%d (set likelihood.batch=%s for LLaDA's meaning)",
                        self._lm_eval_batch, mc_batch, self._lm_eval_batch)
        self._lm_eval_batch = None  # said once

    def apply_chat_template(self, chat_history, add_generation_prompt: bool = True) -> str:
        raise ConfigError("DARE applies the model's own chat template to each context; drop --apply_chat_template",
                          source="lm-eval")
