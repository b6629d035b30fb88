"""Built-in algorithms, one short file each: its config (defaults from the paper's code, the advantage
estimator by name), and a class that declares ``needs``, ``policy_loss`` (see :mod:`dare.trainers.losses`)
and ``default_estimator`` once, with hooks only where the method differs. Each registers its name in its own
``@algorithm`` decorator (imported by :mod:`dare.trainers.plugin`)."""
