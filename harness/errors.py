"""One error hierarchy for the whole project.

Every error a user can cause (bad flag, unknown name, malformed file, missing checkpoint) is a
:class:`DareError`; the command-line tools print its one-line message and exit with code 2 (or the
subclass's own code: a full disk 74, a stop on a signal 75). Anything else escaping to the top is an
internal error (exit 1).
"""

from __future__ import annotations


class DareError(Exception):
    """Base class of every error caused by input the user can fix. The message is one line."""

    exit_code = 2


class ConfigError(DareError):
    """A configuration (YAML file, CLI override) is invalid. Holds every problem found, not just the first."""

    def __init__(self, problems: list[str] | str, source: str | None = None):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(where + "; ".join(self.problems))


class RegistryError(DareError, KeyError):
    """A name is not registered (the message suggests close matches), or collides with another entry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class DataError(DareError):
    """A data file is missing, malformed, or does not match its recorded sha256."""


class InputError(DareError):
    """A user-supplied file or argument is malformed (completions file, path, output directory)."""


class PrerequisiteError(DareError):
    """An optional dependency or resource is missing; the message gives the exact install command."""


class ModelError(DareError):
    """A checkpoint cannot be found or loaded (unknown architecture, missing tensors, bad tokenizer)."""


class SandboxError(DareError):
    """Code execution cannot run safely here (no isolation available without the explicit opt-out)."""


class EngineError(DareError):
    """An engine (or the framework it runs through, e.g. OpenCompass) failed or broke the Engine contract
    (a wrong number of generations, no results); the message names the engine and where to look."""

    exit_code = 1


class DiskFullError(DareError):
    """A write failed for lack of space (ENOSPC, EDQUOT) or over the file-size limit (EFBIG). The message names
    the path and the space needed; what was written before stays readable, so a rerun after freeing space
    resumes. Exit 74 (sysexits' EX_IOERR)."""

    exit_code = 74


class Stopped(DareError):
    """The run stopped at a safe point because it was asked to (SIGTERM from a scheduler, Ctrl-C): everything
    finished is saved and a rerun of the same command resumes. Exit 75 (sysexits' EX_TEMPFAIL: try again)."""

    exit_code = 75


class InfrastructureError(Exception):
    """Something outside the model's control failed (verifier crash, sandbox start-up, timeout of the grader).

    Not a DareError: it is recorded per sample as an ``error`` verdict and never counted as a model failure.
    """
