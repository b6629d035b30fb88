"""What the GPU serving engines (lmdeploy, SGLang) share: checkpoint identity, prompt rendering, typed
options and decoder declarations, option checks before any import, the lazy import with a one-line
install hint, and the Generation records.

A subclass sets ``name``, ``package``, ``install``, ``Options`` (``--set engine.X``), ``decoders``
(remasking -> fields read, typed ``extra``, rules; :mod:`.serving_options`) and ``map_options`` (a pure
function from :mod:`.mapping`) and implements ``_start(options)``, ``_complete(prompts, options) ->
list[str]`` and ``update_weights(named_tensors)``. The package is imported only when a generation is
really needed, so options, refusals, records and cache keys work on any machine.
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import replace
from typing import Any

from dare.backends.models.loader import checkpoint_dir, detect_architecture, fingerprint, read_config
from dare.backends.models.tokenizer import load_tokenizer, render_prompt, use_chat_template
from dare.harness.engine import EngineBase, EngineContext, GenerationRequest
from dare.harness.errors import ConfigError, PrerequisiteError
from dare.harness.options import DecoderInfo
from dare.harness.records import DecodingConfig, Generation, ModelInfo

from .serving_options import engine_kwargs

log = logging.getLogger(__name__)


class ExternalEngine(EngineBase):
    """Engine protocol over an optional GPU serving package; see the module docstring."""

    name = "external"
    version = "0.1.0"
    package = ""
    install = ""
    decoders: dict = {}

    @staticmethod
    def map_options(cfg: DecodingConfig, architecture: str):
        raise NotImplementedError

    def __init__(self, ctx: EngineContext):
        super().__init__(ctx)
        self.options  # noqa: B018  (validated now: a bad option stops before anything else)
        spec = ctx.model_spec
        self.path = checkpoint_dir(ctx)
        self.arch = detect_architecture(read_config(self.path), spec.architecture if spec else None)
        self._tokenizer = None
        self._templated = False
        self._backend: Any = None
        self._backend_options: Any = None

    def model_info(self) -> ModelInfo:
        digest, parts = fingerprint(self.path)
        return ModelInfo(name=self.ctx.model_name, path=str(self.path), architecture=self.arch.name,
                         fingerprint=digest, fingerprint_parts=parts)

    def token_identity(self) -> dict:
        """Every option but the execution-only ones, and the device class (these engines run on CUDA only)."""
        return {**self.options.identity(), "device": "cuda"}

    def decoder(self, decoding: DecodingConfig) -> DecoderInfo:
        """``<engine>:<remasking>``, the fields it reads, its typed ``extra`` and its commit rules."""
        if decoding.remasking not in self.decoders:
            raise ConfigError(f"remasking={decoding.remasking!r} has no {self.name} strategy; choose one of "
                              f"{', '.join(self.decoders)}")
        reads, extra, rules = self.decoders[decoding.remasking]
        return DecoderInfo(name=f"{self.name}:{decoding.remasking}", version=self.version, reads=reads, options=extra,
                           catalog={f"{self.name}:{n}": d[0] for n, d in self.decoders.items()}, rules=rules,
                           option_catalog={f"{self.name}:{n}": frozenset(d[1].model_fields)
                                           for n, d in self.decoders.items()})

    def _engine_options(self, decoding: DecodingConfig):
        """The mapping of ``decoding`` with the typed engine options merged into the constructor's arguments."""
        mapped = self.map_options(decoding, self.arch.name)
        return replace(mapped, engine={**mapped.engine, **engine_kwargs(self.options)})

    def module(self):
        """The serving package, or a one-line PrerequisiteError naming the install command."""
        try:
            module = importlib.import_module(self.package)
        except ImportError as exc:
            raise PrerequisiteError(f"the {self.name} engine needs the {self.package} package ({exc}); "
                                    f"install it on a CUDA machine: {self.install}") from exc
        import torch

        if not torch.cuda.is_available():
            raise PrerequisiteError(f"the {self.name} engine runs on CUDA GPUs only and none is visible; "
                                    "use --engine torch or fastdllm on this machine")
        return module

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        """Refuse inexpressible options first (no import needed), then check the package and the GPU."""
        self.map_options(decoding, self.arch.name)
        self.module()
        if requests:
            self._prompt(requests[0])

    def _prompt(self, request: GenerationRequest) -> str:
        """The chat-templated prompt text, rendered here exactly as the torch engine renders it."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.path)
            self._templated = use_chat_template(self._tokenizer, self.ctx.model_spec)
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        return render_prompt(self._tokenizer, messages, self._templated)

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        options = self._engine_options(decoding)
        if self._backend is None or self._backend_options != options.engine:
            self.close()
            self._backend = self._start(options)
            self._backend_options = options.engine
        began = time.perf_counter()
        texts = self._complete([self._prompt(r) for r in requests], requests, options)
        each = (time.perf_counter() - began) / max(len(requests), 1)
        return [Generation(sample_id=r.sample_id, index=r.index, text=t, latency_s=each)
                for r, t in zip(requests, texts)]

    def close(self) -> None:
        """Shut the serving backend down (frees the GPU)."""
        if self._backend is not None and hasattr(self._backend, "shutdown"):
            self._backend.shutdown()
        self._backend = None

    def _start(self, options):
        raise NotImplementedError

    def _complete(self, prompts: list[str], requests: list[GenerationRequest], options) -> list[str]:
        raise NotImplementedError

    def update_weights(self, named_tensors) -> None:
        """Load new weights ``[(name, tensor), ...]`` (official checkpoint names) into the running engine."""
        raise NotImplementedError
