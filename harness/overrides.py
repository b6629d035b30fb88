"""``--set KEY=VALUE``: the one override grammar of every command-line tool.

A key is ``NAME`` or ``SECTION.NAME``; the value is a YAML scalar (``0.7`` a float, ``true`` a bool,
``{samples: 2}`` a mapping, anything unparsable the text itself). A section may nest: ``extra.KEY=VALUE``
(and ``extra.torch.KEY=VALUE`` for a decoder's namespace) builds the ``extra`` mapping key by key, the same
mapping ``extra='{"KEY": VALUE}'`` gives, so both reach the decoder's typed Options alike. The grammar also
reads pairs that another tool already split and typed (lm-eval's ``--model_args``, inspect's ``-M``): one
spelling of every setting everywhere. What a tool accepts is a declared
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

from .errors import ConfigError, RegistryError
from .records import DecodingConfig
from .registry import likelihoods


def split_assignment(item: str) -> tuple[str, str]:
    """``"key=value"`` -> (key, the value's text); a ValueError naming the item when it is not KEY=VALUE."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{item!r} is not KEY=VALUE")
    return key, raw


def parse_value(raw: str) -> Any:
    """A VALUE as a YAML scalar (``0.7`` float, ``true`` bool, ``{a: 1}`` a mapping), else the text itself."""
    try:
        return yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        return raw


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
    nest: str | None = None
    """Names land under this key of the target, split at their dots into nested mappings
    (``extra.torch.step_schedule`` -> ``{"extra": {"torch": {"step_schedule": ...}}}``)."""


@dataclass(frozen=True)
class Grammar:
    """One tool's ``--set`` table. ``usage`` completes "use ..." in the unknown-section message."""

    bare: Section
    sections: Mapping[str, Section]
    usage: str
    renamed: Mapping[str, str] = field(default_factory=dict)

    def parse(self, items: Iterable[str]) -> dict[str, Any]:
        """``--set`` items as ``{target: {name: value}}`` (bare names of a ``None`` target at the top)."""
        pairs, problems = [], []
        for item in items:
            try:
                pairs.append(split_assignment(item))
            except ValueError as exc:
                problems.append(str(exc))
        return self.parse_pairs(pairs, problems)

    def parse_pairs(self, pairs: Iterable[tuple[str, Any]], problems: list[str] | None = None,
                    source: str = "--set") -> dict[str, Any]:
        """``(key, value)`` pairs as :meth:`parse` returns them; a text value is read as a YAML scalar, as on the
        command line, and a value another tool already typed (a number, a mapping) is kept."""
        out: dict[str, Any] = {}
        problems = list(problems or [])
        for key, value in pairs:
            value = parse_value(value) if isinstance(value, str) else value
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
            if section.nest:
                *path, name = [section.nest, *name.split(".")]
                for step in path:
                    if not isinstance(place.get(step), dict):
                        place[step] = {}  # a scalar given earlier under this key gives way to the mapping
                    place = place[step]
            _merge(place, name, value)
        if problems:
            raise ConfigError(list(dict.fromkeys(problems)), source=source)  # a repeated mistake once
        return out


def _merge(place: dict[str, Any], name: str, value: Any) -> None:
    """``place[name] = value``, a mapping merged into one already there (``extra={...}`` and ``extra.KEY``
    in either order add up; the later one wins a key both give)."""
    old = place.get(name)
    place[name] = {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value


#: what the authors' own evaluation classes call a setting DARE spells otherwise (LLaDA's ``LLaDAEvalHarness``,
#: Dream's ``eval/eval.py``), so a command copied from their scripts is answered with DARE's spelling
AUTHORS_SPELLINGS = {"is_check_greedy": "likelihood.check_greedy", "nll_type": "likelihood.estimator=dream_mc or "
                     "likelihood.estimator=dream_ar", "diffusion_steps": "steps", "max_new_tokens": "gen_length"}
#: the same, for the settings a hosting harness's model takes besides (lm-eval's ``pretrained=`` checkpoint)
HOSTED_SPELLINGS = {**AUTHORS_SPELLINGS, "pretrained": "model_path"}


def likelihood_options() -> set[str]:
    """Every registered scoring estimator's option names (``mc_num``, ``cfg``, ...): a bare one is answered with
    ``likelihood.NAME``. It imports the estimators, so only a setting already refused comes here."""
    names: set[str] = set()
    for estimator in likelihoods.names():
        try:
            options = getattr(likelihoods.get(estimator), "Options", None)
        except RegistryError:  # a broken plugin must not hide the refusal being written
            continue
        names.update(getattr(options, "model_fields", ()))
    return names


def _decoding_hint(spellings: Mapping[str, str]) -> Callable[[str, list[str]], str]:
    def hint(name: str, fields: list[str]) -> str:
        close = [spellings[name]] if name in spellings else []
        close += [f"likelihood.{name}"] if name in likelihood_options() else []
        # beside a name known elsewhere only a near twin is offered (batch: likelihood.batch or batch_size)
        close = (close + difflib.get_close_matches(name, fields, n=2, cutoff=0.65 if close else 0.6))[:2]
        return f"; did you mean {' or '.join(close)}?" if close else f" (decoding fields: {', '.join(fields)})"

    return hint


DECODING_FIELDS = Vocabulary(lambda: DecodingConfig.model_fields, _decoding_hint(AUTHORS_SPELLINGS))
_DECODING = Section("decoding", DECODING_FIELDS)
_CHOICE = Vocabulary(lambda: ("num_fewshot", "chat_template"),
                     lambda name, known: " (choice.num_fewshot or choice.chat_template)")
#: dare-eval (and :func:`dare.harness.plan.plan`): a decoding field bare or as ``decoding.NAME``, a decoder option
#: as ``extra.NAME``; verifier, engine and likelihood-estimator options are typed, so their readers check the names
#: (``likelihood.estimator`` names the estimator, ``choice.num_fewshot`` and ``choice.chat_template`` set a choice
#: benchmark's shots and whether its contexts go through the model's chat template).
EVAL = Grammar(bare=_DECODING, usage="a decoding field, extra.OPTION, verifier.OPTION, engine.OPTION, "
               "likelihood.OPTION, choice.num_fewshot or choice.chat_template",
               sections={"decoding": _DECODING, "extra": Section("decoding", nest="extra"),
                         "verifier": Section("verifier"), "engine": Section("engine"),
                         "likelihood": Section("likelihood"), "choice": Section("choice", _CHOICE)})


#: lm-eval's ``--model_args`` and inspect's ``-M``: dare-eval's table less ``choice`` (the host's task sets its shots)
HOSTED = Grammar(bare=Section("decoding", Vocabulary(DECODING_FIELDS.names, _decoding_hint(HOSTED_SPELLINGS))),
                 usage="a decoding field, extra.OPTION, engine.OPTION or likelihood.OPTION",
                 sections={name: section for name, section in EVAL.sections.items() if name != "choice"})


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
