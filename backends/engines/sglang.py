"""The ``sglang`` engine: LLaDA2.x and SDAR checkpoints through SGLang's diffusion mode (CUDA only).

Decoding options map through :func:`dare.backends.engines.mapping.sglang_options` onto
``sglang.Engine(dllm_algorithm=LowConfidence | JointThreshold, dllm_algorithm_config=<yaml file>,
max_running_requests=batch_size, ...)`` and sampling params (greedy; SGLang's algorithms take argmax).
Engine options are typed (:class:`~.serving_options.SglangOptions`: ``--set engine.tp_size=2``,
``attention_backend``, ``mem_fraction_static``, ...), recorded, and all but the memory fraction enter the
generation cache key. Prompts are rendered by DARE and sent as text.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from dare.harness.engine import GenerationRequest
from dare.harness.errors import EngineError

from .external import ExternalEngine
from .mapping import EngineOptions, sglang_options
from .serving_options import SGLANG_DECODERS, SglangOptions


class SglangEngine(ExternalEngine):
    name = "sglang"
    version = "0.1.0"
    package = "sglang"
    install = "pip install 'sglang>=0.5.9'  (its own environment: it pins torch and transformers)"
    map_options = staticmethod(sglang_options)
    Options = SglangOptions
    decoders = SGLANG_DECODERS

    def _start(self, options: EngineOptions):
        sglang = self.module()
        self._config_dir = tempfile.TemporaryDirectory(prefix="dare-sglang-")
        config_file = Path(self._config_dir.name) / "dllm_algorithm.yaml"
        config_file.write_text(yaml.safe_dump(options.algorithm_config))
        return sglang.Engine(model_path=str(self.path), dllm_algorithm_config=str(config_file), **options.engine)

    def _complete(self, prompts: list[str], requests: list[GenerationRequest], options: EngineOptions) -> list[str]:
        outputs = self._backend.generate(prompts, dict(options.sampling))
        return [o["text"] for o in outputs]

    def update_weights(self, named_tensors) -> None:
        """Replace weights ``[(name, tensor), ...]`` in the running engine (SGLang's update_weights_from_tensor)."""
        if self._backend is None:
            raise EngineError("update_weights needs a started engine: generate once first")
        self._backend.update_weights_from_tensor(list(named_tensors))
