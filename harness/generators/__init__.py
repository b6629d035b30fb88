"""Shipped data files the project builds itself (``harness/data/``), one module per file family.

Synthetic tasks (``long_addition``, with a seed) and the EvalPlus sets converted from their release files
(``evalplus``: HumanEval+ v0.1.10, and MBPP+ v0.2.0 derived from v0.1.0 by ``mbppplus_v020``). Each module
rebuilds its shipped files byte for byte (``python -m dare.harness.generators.<module>``); the files'
sha256 sit in ``harness/data/MANIFEST.sha256`` like every other shipped split.
"""
