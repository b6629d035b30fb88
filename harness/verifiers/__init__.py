"""Verifiers, one per task family; each is also the RL reward for that family.

Registered lazily so that importing the harness does not import math-verify or start a sandbox.
"""

from ..registry import verifiers
from .base import Verifier

verifiers.register("math", "dare.harness.verifiers.math:MathVerifier")
verifiers.register("countdown", "dare.harness.verifiers.countdown:CountdownVerifier")
verifiers.register("sudoku", "dare.harness.verifiers.sudoku:SudokuVerifier")
verifiers.register("code", "dare.harness.verifiers.code:CodeVerifier")
verifiers.register("long_addition", "dare.harness.verifiers.long_addition:LongAdditionVerifier")

__all__ = ["Verifier", "verifiers"]
