"""The ``lmdeploy`` engine: SDAR dense and MoE checkpoints through lmdeploy's PyTorch engine (CUDA only).

Decoding options map through :func:`dare.backends.engines.mapping.lmdeploy_options` onto
``PytorchEngineConfig(dllm_block_length, dllm_denoising_steps, dllm_unmasking_strategy,
dllm_confidence_threshold, ...)`` and per-request ``GenerationConfig`` s (a request's own seed when
sampling). Engine options are typed (:class:`~.serving_options.LmdeployOptions`: ``--set engine.tp=2``,
``dtype``, ``quant_policy``, ``cache_max_entry_count``, ...), recorded, and all but the memory fraction
enter the generation cache key. Prompts are rendered by DARE (same text as the torch engine) and
sent with ``do_preprocess=False``. Note (spec 2.5): lmdeploy keeps a block's last-step KV instead of
recomputing it from the final tokens, so outputs can differ slightly from the torch reference.
"""

from __future__ import annotations

from dare.harness.engine import GenerationRequest
from dare.harness.errors import EngineError

from .external import ExternalEngine
from .mapping import EngineOptions, lmdeploy_options
from .serving_options import LMDEPLOY_DECODERS, LmdeployOptions


class LmdeployEngine(ExternalEngine):
    name = "lmdeploy"
    version = "0.1.0"
    package = "lmdeploy"
    install = "pip install 'lmdeploy>=0.10.1'  (SDAR support landed in 0.10.1)"
    map_options = staticmethod(lmdeploy_options)
    Options = LmdeployOptions
    decoders = LMDEPLOY_DECODERS

    def _start(self, options: EngineOptions):
        lmdeploy = self.module()
        return lmdeploy.pipeline(str(self.path), backend_config=lmdeploy.PytorchEngineConfig(**options.engine))

    def _complete(self, prompts: list[str], requests: list[GenerationRequest], options: EngineOptions) -> list[str]:
        lmdeploy = self.module()
        seeded = options.sampling.get("do_sample", False)
        configs = [lmdeploy.GenerationConfig(**options.sampling, **({"random_seed": r.seed} if seeded else {}))
                   for r in requests]
        outputs = self._backend(prompts, gen_config=configs, do_preprocess=False)
        return [o.text for o in outputs]

    def close(self) -> None:
        if self._backend is not None and hasattr(self._backend, "close"):
            self._backend.close()
        self._backend = None

    def update_weights(self, named_tensors) -> None:
        """Push ``[(name, tensor), ...]`` into the running PyTorch engine (lmdeploy's update_params)."""
        if self._backend is None:
            raise EngineError("update_weights needs a started engine: generate once first")
        from lmdeploy.serve.openai.protocol import UpdateParamsRequest
        from lmdeploy.utils import serialize_state_dict

        payload = serialize_state_dict(dict(named_tensors))
        self._backend.async_engine.engine.update_params(
            UpdateParamsRequest(serialized_named_tensors=payload, finished=True))
