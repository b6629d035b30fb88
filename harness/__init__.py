"""The core of DARE: records, registry, config, data, prompts, verifiers, metrics, runner and CLI.

Nothing here imports a backend or trainer; those are reached through the registry by name.
"""

from .errors import DareError
from .records import DecodingConfig, Generation, RunRecord, Sample, Verdict

__all__ = ["DareError", "DecodingConfig", "Generation", "RunRecord", "Sample", "Verdict"]
