"""Experiments over training runs: algorithm comparisons (:mod:`.compare`), their tables over samples and
seeds (:mod:`.tables`, :mod:`.seeds`) and packaging a finished run as a model (:mod:`.ship`)."""
