"""Training plugins: likelihood estimators, algorithms, the local trainer and the CLI of dare-train.

Public API for plugin authors::

    from dare.trainers import Algorithm, AlgorithmConfig, Estimator, Needs, Policy, RolloutBatch, LossOutput
    from dare.trainers import algorithm, estimator, ops
"""

from . import ops
from . import plugin as _plugin  # noqa: F401  (registers the built-ins)
from .api import (Algorithm, AlgorithmConfig, Estimator, Needs, Policy, algorithm, build_algorithm, build_estimator,
                  estimator)
from .batch import Estimate, LossOutput, RolloutBatch

__all__ = ["Algorithm", "AlgorithmConfig", "Estimate", "Estimator", "LossOutput", "Needs", "Policy", "RolloutBatch",
           "algorithm", "build_algorithm", "build_estimator", "estimator", "ops"]
