"""Built-in likelihood estimators; each registers its name in its own ``@estimator`` decorator (imported by
:mod:`dare.trainers.plugin`)."""
