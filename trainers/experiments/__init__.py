"""Experiments over training runs: algorithm comparisons (:mod:`.compare`), their tables over samples and
seeds (:mod:`.tables`, :mod:`.seeds`), packaging a finished run as a model (:mod:`.ship`), and one update
measured with the decoding policy's exact likelihood (:mod:`.uphill`)."""
