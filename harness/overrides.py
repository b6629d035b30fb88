"""``--set KEY=VALUE`` overrides, routed to the decoding config, the verifier or the engine.

Keys: a DecodingConfig field (``gen_length=256``, also as ``decoding.gen_length``), ``verifier.OPTION``
or ``engine.OPTION``. Values are parsed as YAML scalars (``0.7`` is a float, ``true`` a bool). All bad
keys are reported at once, with suggestions.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from .cliutil import parse_assignment
from .errors import ConfigError
from .records import DecodingConfig

SECTIONS = ("decoding", "verifier", "engine")


@dataclass
class Overrides:
    decoding: dict[str, Any] = field(default_factory=dict)
    verifier: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)


def parse(items: list[str]) -> Overrides:
    out = Overrides()
    problems: list[str] = []
    fields = sorted(DecodingConfig.model_fields)
    for item in items:
        try:
            key, value = parse_assignment(item)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        section, dot, name = key.partition(".")
        if not dot:
            section, name = "decoding", key
        if section not in SECTIONS or not name:
            problems.append(f"unknown setting {key!r} (use a decoding field, verifier.OPTION or engine.OPTION)")
        elif section == "decoding" and name not in fields:
            close = difflib.get_close_matches(name, fields, n=2, cutoff=0.6)
            hint = f"; did you mean {' or '.join(close)}?" if close else f" (decoding fields: {', '.join(fields)})"
            problems.append(f"unknown setting {key!r}{hint}")
        else:
            getattr(out, section)[name] = value
    if problems:
        raise ConfigError(problems, source="--set")
    return out
