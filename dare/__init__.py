"""DARE: evaluation-first benchmark harness for diffusion language models.

The sub-packages map onto the repository's top-level folders: ``dare.harness`` (core, records,
registry, verifiers, runner), ``dare.backends`` (models, decoders, engines), ``dare.trainers``
(algorithm plugins) and ``dare.leaderboards`` (static site builder).
"""

__version__ = "0.1.0"
