"""Built-in likelihood estimators (registered lazily by :mod:`dare.trainers.plugin`)."""
