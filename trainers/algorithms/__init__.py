"""Built-in algorithms; each registers its name in its own ``@algorithm`` decorator (imported by
:mod:`dare.trainers.plugin`)."""
