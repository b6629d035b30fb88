"""Sandboxed execution of generated code: isolation detection, launching, the child runner, the codec, the pool.

The trusted parent never executes candidate code in its own interpreter. See ``isolation`` for the layers,
``launcher`` for the parent-enforced deadline and byte caps, ``child_runner`` for what runs inside (``steward``
for the job's first process, which times every call from outside the candidate's process), and ``codec`` for the
strict plain-data format of everything that crosses the boundary.
"""

from .codec import CodecError, Opaque, decode, encode
from .isolation import Isolation, Limits, detect
from .pool import JobOutcome, Sandbox

__all__ = ["CodecError", "Isolation", "JobOutcome", "Limits", "Opaque", "Sandbox", "decode", "detect", "encode"]
