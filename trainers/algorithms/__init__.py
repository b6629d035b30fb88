"""Built-in algorithms (registered lazily by :mod:`dare.trainers.plugin`)."""
