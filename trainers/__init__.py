"""Training plugins: likelihood estimators, policy losses, advantage estimators, algorithms, the local trainer
and the CLI of dare-train.

Public API for plugin authors::

    from dare.trainers import Algorithm, AlgorithmConfig, Estimator, Needs, Policy, RolloutBatch, LossOutput
    from dare.trainers import RolloutAdditions, advantage, algorithm, estimator, ops, policy_loss
"""

from . import ops
from . import plugin as _plugin  # noqa: F401  (registers the built-ins)
from .advantages import advantage
from .api import (
                  Algorithm,
                  AlgorithmConfig,
                  Estimator,
                  Needs,
                  Policy,
                  RolloutAdditions,
                  algorithm,
                  build_algorithm,
                  build_estimator,
                  estimator,
)
from .batch import Estimate, LossOutput, RolloutBatch
from .losses import policy_loss

__all__ = ["Algorithm", "AlgorithmConfig", "Estimate", "Estimator", "LossOutput", "Needs", "Policy", "RolloutAdditions",
           "RolloutBatch", "advantage", "algorithm", "build_algorithm", "build_estimator", "estimator", "ops",
           "policy_loss"]
