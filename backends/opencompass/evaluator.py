"""``DareVerifierEvaluator``: a DARE verifier and DARE's metrics as an OpenCompass evaluator.

References are DARE sample ids (the ``dare_id`` column of :class:`~.dataset.DareBenchmarkDataset`); each
prediction is one text, or a list of k texts when the model returns several per prompt. The scores are
DARE's metrics (same verifier, same unbiased pass@k, same exclusion of infrastructure errors) in
OpenCompass's percent convention; ``details`` carries every verdict so that ``dare-eval --engine
opencompass`` can write the same run record as the native runner. Registered in ``ICL_EVALUATORS``.
"""

from __future__ import annotations

from typing import Any

from opencompass.openicl.icl_evaluator import BaseEvaluator
from opencompass.registry import ICL_EVALUATORS

from dare.harness import config as cfg
from dare.harness import metrics as metric_lib
from dare.harness.data import load_samples
from dare.harness.errors import InputError
from dare.harness.verifiers import verifiers


@ICL_EVALUATORS.register_module()
class DareVerifierEvaluator(BaseEvaluator):
    """Scores predictions of one DARE benchmark with its verifier (``options``: ``--set verifier.X``)."""

    def __init__(self, benchmark: str, options: dict[str, Any] | None = None, pred_postprocessor=None):
        super().__init__(pred_postprocessor=pred_postprocessor)
        self.benchmark = benchmark
        self.options = dict(options or {})

    def score(self, predictions: list, references: list) -> dict[str, Any]:
        spec = cfg.benchmark(self.benchmark)
        samples = {s.id: s for s in load_samples(spec.data)}
        unknown = sorted({str(r) for r in references} - set(samples))
        if unknown:
            raise InputError(f"{len(unknown)} reference(s) are not sample ids of DARE benchmark {self.benchmark!r}: "
                             f"{', '.join(unknown[:5])}; use the dare_id column as the output column")
        groups = [list(p) if isinstance(p, (list, tuple)) else [p] for p in predictions]
        k = len(groups[0]) if groups else 1
        if any(len(g) != k for g in groups):
            raise InputError(f"predictions of {self.benchmark!r} have different numbers of samples per prompt")
        verifier = verifiers.get(spec.verifier)(**{**spec.verifier_args, **self.options})
        try:
            flat = verifier.verify_batch([(samples[str(r)], text or "")
                                          for r, g in zip(references, groups) for text in g])
            isolation = verifier.describe()
        finally:
            verifier.close()
        per_sample = [flat[i * k:(i + 1) * k] for i in range(len(groups))]
        values, counts = metric_lib.compute(spec.metrics, per_sample, k)
        result: dict[str, Any] = {name: 100 * v.value for name, v in values.items()}
        result["n_error"] = counts["error"]  # infrastructure errors, excluded from the scores above
        if isolation:
            result["dare_isolation"] = isolation
        result["details"] = [
            {"id": str(ref), "correct": any(v.passed for v in verdicts), "pred": g,
             "verdicts": [v.model_dump(mode="json") for v in verdicts]}
            for ref, g, verdicts in zip(references, groups, per_sample)
        ]
        return result
