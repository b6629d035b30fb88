"""``DareModel``: an OpenCompass model over any DARE engine (torch, fastdllm, lmdeploy, sglang, replay, ...).

Registered in ``opencompass.registry.MODELS`` on import, so an OpenCompass config can name it by type::

    models = [dict(type="dare.backends.opencompass.model.DareModel", abbr="llada-8b", engine="fastdllm",
                   model="llada-8b-instruct", decoding=dict(gen_length=256, steps=256, block_length=32),
                   batch_size=8, run_cfg=dict(num_gpus=1))]

The engine is built by registry name with an :class:`~dare.harness.engine.EngineContext`; decoding is the
model config's own settings, then the engine's defaults, then ``decoding``, validated into one frozen
:class:`~dare.harness.records.DecodingConfig`. ``decoding.gen_length`` is the generated length: the
``max_out_len`` OpenCompass passes (a stock dataset's) is ignored, because for a diffusion model the
canvas length changes the answer and belongs to the comparable decoding settings; the first time it
differs, OpenCompass's own logger says so (the task's log under ``logs/infer/``), and
``python -m dare.backends.opencompass`` says it on the console before launching.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from opencompass.models.base import BaseModel
from opencompass.registry import MODELS
from opencompass.utils import get_logger

from dare.harness import config as cfg
from dare.harness.engine import EngineContext, GenerationRequest, request_seed
from dare.harness.errors import ConfigError, EngineError
from dare.harness.likelihood import EstimatorInfo
from dare.harness.models import resolve
from dare.harness.options import capabilities
from dare.harness.records import DecodingConfig, Generation
from dare.harness.registry import engines
from dare.harness.resolve import resolve_decoding

from . import scoring
from .messages import SampleIndex, as_dicts, is_single_prompt, to_messages

log = logging.getLogger(__name__)


@MODELS.register_module()
class DareModel(BaseModel):
    """OpenCompass ``BaseModel`` whose ``generate`` runs a DARE engine under one DecodingConfig.

    Args (all but ``engine`` optional): ``engine`` registry name (or an engine instance), ``model`` a name
    from configs/models (or a free label for replay), ``model_path`` a checkpoint directory, ``decoding``
    DecodingConfig fields (or a DecodingConfig), ``suite`` whose per-suite model settings apply,
    ``engine_options`` (``--set engine.X``), ``completions`` (replay), ``device``, ``benchmarks``: DARE
    benchmarks whose prompts map back to sample ids (so seeds and replay match the native runner);
    ``likelihood`` and ``likelihood_options``: the scoring estimator of PPL and loglikelihood datasets (default
    the model family's; :mod:`.scoring`).
    """

    def __init__(self, engine: Any = "torch", model: str | None = None, model_path: str | None = None,
                 decoding: dict | DecodingConfig | None = None, suite: str | None = None,
                 engine_options: dict | None = None, completions: str | None = None, device: str | None = None,
                 benchmarks: list[str] | tuple[str, ...] = (), limit: int | None = None, path: str = "",
                 max_seq_len: int = 1 << 20, meta_template: dict | None = None, likelihood: str | None = None,
                 likelihood_options: dict | None = None, **unused: Any):
        if unused:
            log.debug("DareModel ignores OpenCompass options %s", sorted(unused))
        self.index, self.index_limit, self._ctx, self._prepared = SampleIndex(benchmarks, limit), limit, None, False
        if isinstance(engine, str):
            engine = self._build_engine(engine, model, model_path, completions, device, engine_options or {})
        self.engine = engine
        self.decoding = self._decoding(decoding, model, suite)
        super().__init__(path=path or str(getattr(engine, "path", "") or model or engine.name),
                         max_seq_len=max_seq_len, meta_template=meta_template,
                         generation_kwargs={"num_return_sequences": self.decoding.num_samples})
        self.generations: dict[tuple[str, int], Generation] = {}
        self._likelihood = (likelihood, likelihood_options)
        self._estimator: EstimatorInfo | None = None
        self._warned_length = False
        self._cached: Callable[[GenerationRequest], Generation | None] | None = None
        self._keep: Callable[[list[GenerationRequest], list[Generation]], None] | None = None

    def serve_from(self, cached: Callable[[GenerationRequest], Generation | None] | None,
                   keep: Callable[[list[GenerationRequest], list[Generation]], None] | None) -> None:
        """Answer requests that ``cached`` knows from it and hand every new batch to ``keep`` (DARE's runner:
        its generation cache) before returning it to OpenCompass."""
        self._cached, self._keep = cached, keep

    def add_benchmark(self, name: str) -> None:
        """Map the prompts of DARE benchmark ``name`` back to their sample ids (DareGenInferencer calls it)."""
        self.index.add(name, self.index_limit)
        ctx = getattr(self.engine, "ctx", None)
        if ctx is not None and ctx is self._ctx and not self._prepared:
            # The engine this model built has not seen a request yet: let it know the benchmark's ids too
            # (replay tells an unknown id from one outside the limit by them).
            self.engine.ctx = self._ctx = replace(ctx, sample_ids=frozenset(self.index.sample_ids))

    def _build_engine(self, name: str, model: str | None, model_path: str | None, completions: str | None,
                      device: str | None, options: dict):
        engine_cls = engines.get(name)
        resolved = resolve(model or (None if model_path else name), model_path,
                           capabilities(engine_cls).needs_checkpoint)
        ctx = EngineContext(model_name=resolved.name, model_spec=resolved.spec, model_path=resolved.path,
                            completions=Path(completions) if completions else None, device=device,
                            options=options, sample_ids=frozenset(self.index.sample_ids))
        self._ctx = ctx
        return engine_cls(ctx)

    def _decoding(self, decoding: dict | DecodingConfig | None, model: str | None, suite: str | None) -> DecodingConfig:
        if isinstance(decoding, DecodingConfig):
            return decoding
        spec = cfg.model(model) if model and cfg.model_name(model) in cfg.names("models") else None
        return resolve_decoding(self.engine, spec, suite or "default", decoding, source="DareModel decoding").config

    def parse_template(self, prompt_template: Any, mode: str) -> Any:
        """In gen mode: chat messages as dicts (one list per prompt), never a flattened string."""
        if mode != "gen":
            return super().parse_template(prompt_template, mode)
        if is_single_prompt(prompt_template):
            return as_dicts(to_messages(prompt_template))
        return [self.parse_template(p, mode) for p in prompt_template]

    def generate(self, inputs: list[Any], max_out_len: int, **kwargs: Any) -> list[str]:
        """k = ``decoding.num_samples`` texts per input, input-major (what OpenCompass groups back)."""
        if max_out_len and max_out_len != self.decoding.gen_length and not self._warned_length:
            get_logger().warning(  # OpenCompass's logger: this lands in the task's log, where users look
                f"{self.engine.name} engine: the dataset asks for max_out_len={max_out_len}; DARE decodes "
                f"gen_length={self.decoding.gen_length} tokens "
                "(set decoding=dict(gen_length=...) in dare_model to change it)")
            self._warned_length = True
        requests = []
        for prompt in inputs:
            messages = to_messages(prompt)
            sample_id = self.index.sample_id(messages)
            requests.extend(GenerationRequest(sample_id, i, messages, request_seed(self.decoding.seed, sample_id, i))
                            for i in range(self.decoding.num_samples))
        known = [self._cached(r) if self._cached else None for r in requests]
        missing = [r for r, g in zip(requests, known) if g is None]
        if missing:
            if not self._prepared:
                self.engine.prepare(missing, self.decoding)
                self._prepared = True
            generated = self.engine.generate(missing, self.decoding)
            if len(generated) != len(missing):
                raise EngineError(f"engine {self.engine.name} returned {len(generated)} generations "
                                  f"for {len(missing)} requests")
            if self._keep:
                self._keep(missing, generated)
            fresh = iter(generated)
            known = [g if g is not None else next(fresh) for g in known]
        outputs = known
        for request, generation in zip(requests, outputs):
            self.generations[(request.sample_id, request.index)] = generation
        return [g.text for g in outputs]

    def get_token_len(self, prompt: Any) -> int:
        """Prompt length in the engine's tokens where it can tell (torch), else in whitespace words."""
        messages = to_messages(prompt)
        if hasattr(self.engine, "prompt_ids"):
            return len(self.engine.prompt_ids(messages))
        return sum(len(m.content.split()) for m in messages)

    def _scoring(self) -> EstimatorInfo:
        if self._estimator is None:
            self._estimator = scoring.estimator(self.engine, *self._likelihood)
        return self._estimator

    def get_ppl(self, inputs: list[str], mask_length: list[int] | None = None) -> np.ndarray:
        """Per input, nats per token of the engine's whole-text likelihood estimate (lower is better); an array,
        as OpenCompass's inferencers call ``.tolist()`` on it."""
        return np.asarray(scoring.perplexities(self.engine, self._scoring(), inputs, mask_length, self.decoding.seed))

    def get_loglikelihood(self, inputs: list[str], conts: list[str], mask_length=None) -> np.ndarray:
        """Per input, the estimate of log p(continuation | the input without it) (an array, as for get_ppl)."""
        if mask_length is not None:
            raise ConfigError("get_loglikelihood takes no mask_length (OpenCompass's own models refuse it too)")
        return np.asarray(scoring.loglikelihoods(self.engine, self._scoring(), inputs, conts, self.decoding.seed))

    def get_ppl_tokenwise(self, inputs, mask_length=None):
        raise NotImplementedError("DareModel scores whole texts (get_ppl), not tokens")

    def encode(self, prompt: str):
        raise NotImplementedError("DareModel does not expose token ids; use get_token_len")

    def decode(self, tokens):
        raise NotImplementedError("DareModel does not expose token ids")
