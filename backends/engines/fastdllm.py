"""The ``fastdllm`` engine: the torch engine's models and decoders with KV caching (Fast-dLLM, dKV-Cache).

Same requests, DecodingConfig fields, batching, per-request seeds, NFE and trajectory records as the
reference :class:`~dare.backends.engines.torch.TorchEngine`, on CPU or one GPU. ``DecodingConfig.cache``
chooses the forward: ``none`` (identical to the reference), ``prefix`` or ``dual`` (approximate:
prefix / suffix keys are refreshed once per block, see :mod:`dare.backends.decoding.fastdllm`) or ``dkv``
(delayed caching of decoded tokens, :mod:`dare.backends.decoding.dkv_cache`); caches are the entries of
``registry.caches``, each runs under every masked-diffusion commit rule.
Parallel commits come from ``threshold`` (top-1 plus all >= tau) or ``factor``.
Masked-diffusion models (LLaDA, Dream) get the cached loop; block-diffusion models (SDAR, LLaDA2.x)
already decode with their exact block cache, so they accept only ``cache=none`` and run the reference.
"""

from __future__ import annotations

import logging

import torch

from dare.backends.decoding.fastdllm import cache_reads, cache_strategy, cached_decoder
from dare.backends.decoding.spec import DecoderSpec
from dare.backends.models.checkpoint import official_names
from dare.harness.errors import ConfigError, ModelError
from dare.harness.options import DecoderInfo
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

from .torch import TorchEngine

log = logging.getLogger(__name__)


class FastDllmEngine(TorchEngine):
    """Engine protocol over the plain-PyTorch models with Fast-dLLM prefix / dual caches."""

    name = "fastdllm"
    version = "0.1.0"

    def _spec(self, decoding: DecodingConfig) -> DecoderSpec:
        """The reference decoder's spec (or a ConfigError), and for a cacheable rule its cached counterpart."""
        reference = super()._spec(decoding)
        if not reference.cacheable:
            if decoding.cache != "none" and self.arch.decoding_family == "block":
                raise ConfigError(f"cache={decoding.cache} applies to masked-diffusion models (LLaDA, Dream); "
                                  f"{self.arch.name} already decodes with its exact block cache: use cache=none")
            if decoding.cache != "none":
                raise ConfigError(f"remasking={decoding.remasking} runs its own forward and no KV cache; "
                                  "use cache=none or another remasking")
            return reference
        cache_strategy(decoding.cache, self.arch.decoding_family)  # unknown cache or family: one line, rc 2
        return cached_decoder(reference, decoding.cache)

    def decoder(self, decoding: DecodingConfig) -> DecoderInfo:
        """The cached decoder's declaration: the cacheable rules also read ``cache``, and under a cache its
        options and fields (e.g. dKV's ``dkv_refresh``; no ``cfg_scale``)."""
        info = super().decoder(decoding)
        mode = decoding.cache
        catalog = {name: cache_reads(reads, mode) if decoders.get(name).cacheable else reads
                   for name, reads in info.catalog.items()}
        return DecoderInfo(name=f"fastdllm:{info.name}", version=info.version, reads=info.reads, options=info.options,
                           catalog={f"fastdllm:{n}": r for n, r in catalog.items()}, namespaces=info.namespaces,
                           option_catalog={f"fastdllm:{n}": o for n, o in info.option_catalog.items()},
                           rules=info.rules, spec=info.spec, bind=info.bind)

    def prepare(self, requests, decoding: DecodingConfig) -> None:
        """The cache-mode check, then the torch engine's checks (decoder, steps, guidance, prompts)."""
        self._spec(decoding)
        super().prepare(requests, decoding.model_copy(update={"cache": "none"}))

    def update_weights(self, named_tensors) -> None:
        """Copy ``[(name, tensor), ...]`` into the loaded network, in place (same API as the lmdeploy and
        sglang engines). Names are the checkpoint's official ones (per-expert tensors one by one) or the
        internal parameter names; an unknown name or a shape mismatch is a ModelError."""
        net = self.model.net
        params = dict(net.named_parameters())
        targets: dict[str, tuple[str, int | None]] = {name: (name, None) for name in params}
        for name, p in params.items():
            stacked = ".experts_" in name  # (E, out, in): one official tensor per expert
            for e, official in enumerate(official_names(self.arch, name, n_experts=p.shape[0] if stacked else 0)):
                targets[official] = (name, e if stacked else None)
        with torch.no_grad():
            for name, tensor in named_tensors:
                if name not in targets:
                    raise ModelError(f"update_weights: {name!r} is not a parameter of this {self.arch.name} model")
                internal, expert = targets[name]
                dest = params[internal] if expert is None else params[internal][expert]
                if dest.shape != tensor.shape:
                    raise ModelError(f"update_weights: {name!r} has shape {tuple(tensor.shape)}, "
                                     f"the model expects {tuple(dest.shape)}")
                dest.copy_(tensor.to(dest.device, dest.dtype))
