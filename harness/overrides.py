"""``--set KEY=VALUE``: the one override grammar of every command-line tool.

A key is ``NAME`` or ``SECTION.NAME``; the value is a YAML scalar (``0.7`` a float, ``true`` a bool,
``{samples: 2}`` a mapping, anything unparsable the text itself). What a tool accepts is a declared
:class:`Grammar`, a table and not code: where undotted keys go, which sections exist and where each
lands, which names are checked while parsing (the rest are typed options their reader checks), and old
section spellings that are refused with the new one. dare-eval's table is :data:`EVAL` (a DecodingConfig
field, ``decoding.``, ``verifier.``, ``engine.``); dare-train declares its own next to TrainConfig.
Every problem is reported at once, as one :class:`ConfigError` from ``--set`` (exit 2).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import ConfigError
from .records import DecodingConfig


def parse_assignment(item: str) -> tuple[str, Any]:
    """``"key=value"`` -> (key, value parsed as a YAML scalar: ``0.7`` float, ``true`` bool, else text).

    Raises ValueError naming the item when it is not KEY=VALUE.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{item!r} is not KEY=VALUE")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


@dataclass(frozen=True)
class Vocabulary:
    """Names checked while parsing, and the hint a misspelt one gets (``"; did you mean ...?"``)."""

    names: Callable[[], Iterable[str]]
    hint: Callable[[str, list[str]], str]

    def problem(self, key: str, name: str) -> str | None:
        known = sorted(self.names())
        return None if name in known else f"unknown setting {key!r}{self.hint(name, known)}"


@dataclass(frozen=True)
class Section:
    """Where the names of one section land: ``target`` in the result (None: the result itself, for
    tools whose undotted keys are top-level fields), checked against ``vocabulary`` when it has one."""

    target: str | None
    vocabulary: Vocabulary | None = None


@dataclass(frozen=True)
class Grammar:
    """One tool's ``--set`` table. ``usage`` completes "use ..." in the unknown-section message."""

    bare: Section
    sections: Mapping[str, Section]
    usage: str
    renamed: Mapping[str, str] = field(default_factory=dict)

    def parse(self, items: Iterable[str]) -> dict[str, Any]:
        """``--set`` items as ``{target: {name: value}}`` (bare names of a ``None`` target at the top)."""
        out: dict[str, Any] = {}
        problems: list[str] = []
        for item in items:
            try:
                key, value = parse_assignment(item)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            head, dot, name = key.partition(".")
            if dot and head in self.renamed:
                problems.append(f"unknown setting {key!r}; use {self.renamed[head]}.{name}")
                continue
            section = self.sections.get(head) if dot else self.bare
            name = name if dot else key
            if section is None or not name:
                problems.append(f"unknown setting {key!r} (use {self.usage})")
                continue
            problem = section.vocabulary.problem(key, name) if section.vocabulary else None
            if problem:
                problems.append(problem)
                continue
            place = out if section.target is None else out.setdefault(section.target, {})
            place[name] = value
        if problems:
            raise ConfigError(list(dict.fromkeys(problems)), source="--set")  # a repeated mistake once
        return out


def _decoding_hint(name: str, fields: list[str]) -> str:
    close = difflib.get_close_matches(name, fields, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else f" (decoding fields: {', '.join(fields)})"


DECODING_FIELDS = Vocabulary(lambda: DecodingConfig.model_fields, _decoding_hint)
_DECODING = Section("decoding", DECODING_FIELDS)
_CHOICE = Vocabulary(lambda: ("num_fewshot",), lambda name, known: " (choice.num_fewshot only)")
#: dare-eval (and :func:`dare.harness.plan.plan`): a decoding field bare or as ``decoding.NAME``;
#: verifier, engine and likelihood-estimator options are typed, so their readers check the names
#: (``likelihood.estimator`` names the estimator, ``choice.num_fewshot`` sets a choice benchmark's shots).
EVAL = Grammar(bare=_DECODING, usage="a decoding field, verifier.OPTION, engine.OPTION, likelihood.OPTION or "
               "choice.num_fewshot",
               sections={"decoding": _DECODING, "verifier": Section("verifier"), "engine": Section("engine"),
                         "likelihood": Section("likelihood"),
                         "choice": Section("choice", _CHOICE)})


@dataclass
class Overrides:
    """dare-eval's ``--set`` items by section."""

    decoding: dict[str, Any] = field(default_factory=dict)
    verifier: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    likelihood: dict[str, Any] = field(default_factory=dict)
    choice: dict[str, Any] = field(default_factory=dict)


def parse(items: list[str]) -> Overrides:
    """dare-eval's ``--set`` items, through :data:`EVAL`."""
    return Overrides(**EVAL.parse(items))
