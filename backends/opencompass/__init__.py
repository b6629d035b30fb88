"""The OpenCompass bridge: DARE engines as OpenCompass models, DARE benchmarks as OpenCompass datasets and
DARE verifiers as OpenCompass evaluators, without a fork and without copying OpenCompass code.

Importing this package does not import OpenCompass (so ``dare-eval --engine opencompass`` can fail with
one line where it is missing). The submodules do, and register their classes in OpenCompass's own
registries when imported:

* :mod:`.model`     ``DareModel`` in ``opencompass.registry.MODELS``: any DARE engine, by registry name;
* :mod:`.dataset`   ``DareBenchmarkDataset`` in ``LOAD_DATASET``: DARE's shipped, sha256-checked data
  with DARE's prompt templates;
* :mod:`.evaluator` ``DareVerifierEvaluator`` in ``ICL_EVALUATORS``: DARE's verifiers and metrics;
* :mod:`.configs`   ``dare_model`` / ``dare_datasets``: config dicts for OpenCompass's own CLI;
* :mod:`.runner`    the ``opencompass`` engine of ``dare-eval``: runs a suite in-process and writes the
  same run record as the native runner.

OpenCompass 0.5.4 pins ``numpy<2`` (verl needs ``numpy>=2``), so it lives in its own environment; the
README's "OpenCompass" section gives the install commands.
"""

from __future__ import annotations

from dare.harness.errors import PrerequisiteError

INSTALL = "pip install 'dare-dllm[opencompass]' (in its own venv: OpenCompass 0.5.4 pins numpy<2, verl needs numpy>=2)"


def require_opencompass():
    """The ``opencompass`` module, or a one-line :class:`PrerequisiteError` naming the install command."""
    try:
        import opencompass
        from opencompass.models.base import BaseModel  # noqa: F401  (a partial install fails here, not later)
    except ImportError as exc:
        raise PrerequisiteError(f"the opencompass engine needs the opencompass package ({exc}); "
                                f"install it: {INSTALL}") from None
    return opencompass
