"""DARE: evaluation-first benchmark harness for diffusion language models.

The sub-packages map onto the repository's top-level folders: ``dare.harness`` (core, records,
registry, verifiers, runner), ``dare.backends`` (models, decoders, engines), ``dare.trainers``
(algorithm plugins) and ``dare.leaderboards`` (static site builder).

The library entry point is ``dare.plan(model=..., suite=..., engine=..., overrides=[...])`` (or
``dare.plan(dare.EvalRequest(...))``; everything resolved and validated, nothing generated or started) and
``dare.evaluate(plan) -> RunRecord``; ``dare.describe(plan)`` is what ``dare-eval --dry-run`` prints. They are
imported on first use, so ``import dare`` stays cheap.
"""

__version__ = "0.1.0"
__all__ = ["EvalRequest", "describe", "evaluate", "plan"]


def __getattr__(name: str):
    if name in ("plan", "evaluate", "EvalRequest"):
        from .harness import plan as _plan

        return getattr(_plan, name)
    if name == "describe":
        from .harness.dryrun import describe

        return describe
    raise AttributeError(f"module 'dare' has no attribute {name!r}")
