"""The reference ``torch`` engine: plain-PyTorch dLLMs and decoders, CPU or one GPU.

Requests are rendered with the model's chat template (a trailing assistant message is a prefix to
continue), tokenised, batched by ``decoding.batch_size`` with left padding, and decoded by the decoder
registered as ``<family>:<remasking>`` for the model's architecture. Each request samples from its own
generator seeded with ``request.seed``, so outputs do not depend on batch composition.
Engine options: ``record_trajectory`` (``DecodingConfig.extra["torch"]`` or ``--set engine.record_trajectory=true``),
``dtype`` (float32 / bfloat16 / float16) and ``threads`` (CPU threads) from ``--set engine.NAME=VALUE``;
a decoder's ``extra`` options are its spec's typed Options model (:mod:`dare.backends.decoding.spec`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Literal

import torch

from dare.backends import decoding as _decoding  # noqa: F401  (registers the decoders)
from dare.backends import models as _models  # noqa: F401  (registers the architectures)
from dare.backends.decoding import strategies
from dare.backends.decoding.common import Canvas, DecodeResult, steps_per_block
from dare.backends.decoding.mdm import decode_masked_diffusion
from dare.backends.decoding.spec import NAMESPACES, DecoderSpec
from dare.backends.likelihood.engine import LikelihoodMixin
from dare.backends.models.loader import (
    LoadedModel,
    checkpoint_dir,
    detect_architecture,
    fingerprint,
    load_model,
    read_config,
)
from dare.backends.models.tokenizer import load_tokenizer, render_prompt, use_chat_template
from dare.harness.engine import EngineBase, EngineContext, GenerationRequest
from dare.harness.errors import ConfigError, ModelError
from dare.harness.options import Capabilities, DecoderInfo, Options
from dare.harness.records import DecodingConfig, Generation, Message, ModelInfo, Trajectory
from dare.harness.registry import decoders

log = logging.getLogger(__name__)
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class TorchOptions(Options):
    """``--set engine.X``: ``dtype`` (default float32 on CPU, bfloat16 on CUDA), ``attention`` (kernel,
    see :mod:`dare.backends.models.attention`), ``threads`` (CPU threads; execution only) and
    ``record_trajectory`` (keep the per-token commit steps)."""

    execution_only = frozenset({"threads"})
    dtype: Literal["float32", "bfloat16", "float16"] | None = None
    attention: str = "auto"
    threads: int | None = None
    record_trajectory: bool = False


class TorchEngine(LikelihoodMixin, EngineBase):
    """Engine protocol implementation over :mod:`dare.backends.models` and :mod:`dare.backends.decoding`;
    likelihood scoring through :mod:`dare.backends.likelihood`."""

    name = "torch"
    version = "0.1.0"
    Options = TorchOptions
    capabilities = Capabilities(decoding_defaults=True, records_trajectory=True, in_process_model=True,
                                typed_decoding=True, decodes_windows=True, likelihood=True)

    def __init__(self, ctx: EngineContext):
        super().__init__(ctx)
        spec = ctx.model_spec
        # no checkpoint for a known model: a dry run planned from its model config alone (loading names the fix)
        self.path = checkpoint_dir(ctx) if ctx.model_path or not spec or spec.path else None
        self._templated: bool | None = None
        self.config = read_config(self.path) if self.path else {}
        self.arch = detect_architecture(self.config, spec.architecture if spec else None)
        self.device = ctx.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.options.threads:  # --set engine.threads=N: tiny models on shared CPUs run best on 1
            torch.set_num_threads(int(self.options.threads))
        self._model: LoadedModel | None = None
        self._tokenizer = None  # the checkpoint's tokenizer, read for plan-time bindings only

    @property
    def model(self) -> LoadedModel:
        if self._model is None:
            spec = self.ctx.model_spec
            self._model = load_model(self._checkpoint(), self.arch.name, mask_id=spec.mask_id if spec else None,
                                     eos_id=spec.eos_id if spec else None,
                                     stop_tokens=spec.stop_tokens if spec else (), device=self.device,
                                     dtype=_DTYPES[self._dtype()], attention=self.options.attention)
        return self._model

    def _checkpoint(self) -> Path:
        return self.path or checkpoint_dir(self.ctx)  # without one: the one-line error naming --model-path

    def use_model(self, model: LoadedModel) -> None:
        """Decode with ``model`` from now on (a trainer's policy, or weights it filled in itself)."""
        self._model = model

    def model_info(self) -> ModelInfo:
        digest, parts = fingerprint(self._checkpoint())
        return ModelInfo(name=self.ctx.model_name, path=str(self.path), architecture=self.arch.name,
                         fingerprint=digest, fingerprint_parts=parts)

    def _dtype(self) -> str:
        """The dtype the weights run in (load_model's rule when none is set: bfloat16 on CUDA, else float32)."""
        return self.options.dtype or ("bfloat16" if str(self.device).startswith("cuda") else "float32")

    def token_identity(self) -> dict:
        """dtype, kernel and device class change tokens; the thread count does not."""
        return {**self.options.identity(), "dtype": self._dtype(), "device": str(self.device).split(":")[0]}

    def decoder(self, decoding: DecodingConfig) -> DecoderInfo:
        """The registered decoder ``<family>:<remasking>``'s declaration (a ConfigError if none): the one spec
        lookup of a run; the resolver hands its typed options back to :meth:`generate`."""
        spec = self._spec(decoding)
        family = self.arch.decoding_family
        specs = {f"{family}:{s}": decoders.get(f"{family}:{s}") for s in strategies(family)}
        bind = partial(self._bind, spec.bind) if spec.bind is not None else None
        return DecoderInfo(name=f"{family}:{decoding.remasking}", version=spec.version, reads=spec.reads,
                           options=spec.Options, catalog={name: d.reads for name, d in specs.items()},
                           option_catalog={name: frozenset(d.Options.model_fields) for name, d in specs.items()},
                           namespaces=NAMESPACES, rules=dict(spec.rules), spec=spec, bind=bind)

    def _bind(self, bind, options: Options) -> Options:
        """A decoder's plan-time binding, with the model's tokenizer (the loaded one, or at plan time the
        checkpoint's alone: no weights are loaded for it) and the run's cache directory."""
        if self._tokenizer is None:
            self._tokenizer = self._model.tokenizer if self._model is not None else load_tokenizer(self._checkpoint())
        return bind(options, self._tokenizer, self.ctx.cache_dir)

    def decoding_defaults(self) -> dict:
        """The architecture's usual decoding when the model has no ModelSpec (checkpoint given by path)."""
        return {} if self.ctx.model_spec else dict(self.arch.decoding_defaults)

    def _spec(self, decoding: DecodingConfig) -> DecoderSpec:
        """The decoder spec ``decoding`` selects for this model's family (a ConfigError naming the choices)."""
        name = f"{self.arch.decoding_family}:{decoding.remasking}"
        if name not in decoders:
            raise ConfigError(f"remasking {decoding.remasking!r} is not available for {self.arch.name} models; "
                              f"choose one of {', '.join(strategies(self.arch.decoding_family))}")
        return decoders.get(name)

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        """Check decoder, step schedule, chat template and tokenizer before any generation."""
        spec = self._spec(decoding)
        if "steps" in spec.reads:  # a decoder that runs each block until full has no step schedule to check
            steps_per_block(decoding)
        if decoding.cfg_scale > 0 and not spec.supports_cfg:
            raise ConfigError(f"cfg_scale={decoding.cfg_scale}: classifier-free guidance is only implemented for "
                              f"masked-diffusion decoders, not {self.arch.name}; use cfg_scale=0")
        if decoding.cache != "none":
            raise ConfigError(f"cache={decoding.cache} is approximate Fast-dLLM caching, not part of the reference "
                              "torch engine; use cache=none here (the block models always use their exact cache)")
        if requests:
            self.prompt_ids(requests[0].messages)

    def _use_template(self) -> bool:
        if self._templated is None:
            self._templated = use_chat_template(self.model.tokenizer, self.ctx.model_spec)
        return self._templated

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the prompt the decoder sees: chat template applied (a trailing assistant message is
        continued). Trainers use this too, so likelihoods are computed on exactly the decoded prompt."""
        rendered = [{"role": m.role, "content": m.content} for m in messages]
        text = render_prompt(self.model.tokenizer, rendered, self._use_template())
        ids = self.model.tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ModelError("a prompt tokenises to nothing; check the model's chat template and tokenizer")
        return ids

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig,
                 decoder: DecoderInfo | None = None, options: Options | None = None) -> list[Generation]:
        """Decode ``requests`` with the resolver's ``decoder`` and typed ``options`` (``dare.harness.resolve``);
        a caller without them (a test, a benchmark) gets the same from ``decoding`` here."""
        self.prepare([], decoding)
        if decoder is None or options is None:  # a worker of --workers N, a test: resolve and bind here
            decoder = self.decoder(decoding)
            options = decoder.spec.options(decoding)
            if decoder.bind is not None:
                options = decoder.bind(options)
        out: list[Generation] = []
        for start in range(0, len(requests), decoding.batch_size):
            batch = requests[start:start + decoding.batch_size]
            out.extend(self._generate_batch(batch, decoding, decoder.spec, options))
        return out

    def decode_window(self, prompts: list[list[int]], states: torch.Tensor, window: tuple[int, int],
                      decoding: DecodingConfig, seeds: list[int], decoder: DecoderInfo | None = None,
                      options: Options | None = None) -> DecodeResult:
        """Continue decoding: rows of prompt ids ``prompts`` whose generated canvases ``states`` (N, G) ran the
        schedule's steps before ``window[0]`` (mask ids where undecided) run its steps ``window`` = (start,
        stop) with the decoder and options of :meth:`generate`, a generator per row seeded with ``seeds``,
        in batches of ``decoding.batch_size``. Returns tokens (N, G) after the window, commit_step (N, G)
        (global steps, -1 for tokens decided before it) and nfe (N,). d-TreeRPO branches its rollouts here."""
        self.prepare([], decoding)
        if decoding.cache != "none":
            raise ConfigError(f"cache={decoding.cache} cannot resume a partial canvas; use cache=none")
        if decoder is None or options is None:
            decoder = self.decoder(decoding)
            options = decoder.spec.options(decoding)
        if decoder.spec.loop is not decode_masked_diffusion:
            raise ConfigError(f"remasking={decoding.remasking} runs its own loop, which cannot resume a partial "
                              "canvas for a window of steps; use low_confidence or random (LLaDA, Dream)")
        model, parts = self.model, []
        for lo in range(0, len(prompts), decoding.batch_size):
            rows = slice(lo, lo + decoding.batch_size)
            canvas = Canvas.build(prompts[rows], decoding.gen_length, model.mask_id, model.pad_id, model.device)
            canvas.tokens[:, canvas.gen_slice] = states[rows].to(model.device)
            canvas.window = window
            gens = [torch.Generator(device=model.device).manual_seed(s) for s in seeds[rows]]
            with torch.inference_mode():
                parts.append(decoder.spec(model, canvas, decoding, gens, options))
        return DecodeResult(*(torch.cat([getattr(p, f) for p in parts]) for f in ("tokens", "commit_step", "block",
                                                                                  "nfe")))

    def _generate_batch(self, batch: list[GenerationRequest], decoding: DecodingConfig, spec: DecoderSpec,
                        options: Options) -> list[Generation]:
        model = self.model
        began = time.perf_counter()
        prompts = [self.prompt_ids(r.messages) for r in batch]
        canvas = Canvas.build(prompts, decoding.gen_length, model.mask_id, model.pad_id, model.device)
        # one generator per request on the model's device: noise never depends on the batch around it
        gens = [torch.Generator(device=model.device).manual_seed(r.seed) for r in batch]
        with torch.inference_mode():
            result = spec(model, canvas, decoding, gens, options)
        elapsed = time.perf_counter() - began
        set_here = "record_trajectory" in options.model_fields_set  # the decoding's own setting wins over the engine's
        record = options.record_trajectory if set_here else self.options.record_trajectory
        gens_out = []
        for row, request in enumerate(batch):
            ids = result.tokens[row].tolist()
            stop = next((i for i, t in enumerate(ids) if t in model.stop_ids), None)
            shown = ids[:stop] if decoding.stop_at_eos and stop is not None else ids
            text = model.tokenizer.decode(shown, skip_special_tokens=True)
            trajectory = Trajectory(commit_step=result.commit_step[row].tolist(), block=result.block[row].tolist(),
                                    nfe=int(result.nfe[row])) if record else None
            gens_out.append(Generation(
                sample_id=request.sample_id, index=request.index, text=text, token_ids=ids,
                finish_reason="stop" if stop is not None else "length", nfe=int(result.nfe[row]),
                nfe_official=None if result.nfe_official is None else int(result.nfe_official[row]),
                latency_s=elapsed / len(batch), trajectory=trajectory))
        log.debug("decoded %d requests in %.2fs", len(batch), elapsed)
        return gens_out
