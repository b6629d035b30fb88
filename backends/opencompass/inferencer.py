"""``DareGenInferencer``: OpenCompass's ``GenInferencer`` that names the DARE benchmark to the model.

OpenCompass hands a model prompts only. A DARE generation's seed derives from its sample id, so
:class:`~.model.DareModel` maps each prompt back to its id through an index of rendered prompts; this
inferencer adds its dataset's benchmark to that index before generating. A config therefore needs no
``benchmarks=`` on the model for sampled results to equal the native runner's. Registered in
``opencompass.registry.ICL_INFERENCERS``.
"""

from __future__ import annotations

from opencompass.openicl.icl_inferencer import GenInferencer
from opencompass.registry import ICL_INFERENCERS


@ICL_INFERENCERS.register_module()
class DareGenInferencer(GenInferencer):
    """``GenInferencer(..., benchmark=NAME)``: tells a model with ``add_benchmark`` (DareModel) which DARE
    benchmark the prompts come from; any other model runs exactly as under ``GenInferencer``."""

    def __init__(self, model, *args, benchmark: str | None = None, **kwargs):
        super().__init__(model, *args, **kwargs)
        if benchmark and hasattr(model, "add_benchmark"):
            model.add_benchmark(benchmark)
