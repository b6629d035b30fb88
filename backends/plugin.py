"""Entry point (group ``dare.plugins``) that registers this package's engines and decoders with the harness.

Only lazy ``module:attr`` strings: importing this module imports no torch.
"""

from dare.backends import decoding as _decoding  # noqa: F401  (registers the decoders, lazily: no torch)
from dare.backends import likelihood as _likelihood  # noqa: F401  (registers the scoring estimators, lazily)
from dare.harness.registry import engines

engines.register("replay", "dare.backends.engines.replay:ReplayEngine")
engines.register("torch", "dare.backends.engines.torch:TorchEngine")
engines.register("fastdllm", "dare.backends.engines.fastdllm:FastDllmEngine")
engines.register("lmdeploy", "dare.backends.engines.lmdeploy:LmdeployEngine")
engines.register("sglang", "dare.backends.engines.sglang:SglangEngine")
engines.register("transformers", "dare.backends.engines.transformers_native:TransformersEngine")
engines.register("opencompass", "dare.backends.opencompass.runner:OpenCompassEngine")
