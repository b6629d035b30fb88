"""Synthetic tasks the project generates and ships (``harness/data/``), one module per task, each with a seed.

Each module rebuilds its shipped files byte for byte (``python -m dare.harness.generators.<task>``); the
files' sha256 sit in ``harness/data/MANIFEST.sha256`` like every other shipped split.
"""
