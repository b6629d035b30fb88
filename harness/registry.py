"""One small registry mechanism for everything pluggable.

A :class:`Registry` maps names to objects (classes or functions). Entries may be lazy ``"module:attr"``
strings, imported on first use, so heavy backends cost nothing until asked for; a lazy ``"module"`` (no
attribute) names the module whose import registers the entry itself (a decorated declaration). Third-party packages
register through the entry-point group ``dare.plugins``: each entry point names a module whose import
registers things; the group is loaded once, on the first miss or listing. The training registries (algorithms,
their likelihood estimators, policy losses, advantage estimators) also load ``dare.plugins.training``, where
the project's trainers register: their modules import torch, which a replay evaluation or a refused command
line would otherwise wait for (about 1.5 s of every dare-eval start). Registering a name twice with different
objects is an error; a miss raises :class:`RegistryError` with "did you mean" suggestions.
"""

from __future__ import annotations

import difflib
import importlib
import logging
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from .errors import RegistryError

log = logging.getLogger(__name__)

T = TypeVar("T")
ENTRY_POINT_GROUP = "dare.plugins"
TRAINING_GROUP = "dare.plugins.training"
_loaded_groups: set[str] = set()


def did_you_mean(name: str, candidates: list[str]) -> str:
    """``"; did you mean 'x'?"`` for close matches of ``name``, or an empty string."""
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.5)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def load_plugins(group: str = ENTRY_POINT_GROUP) -> None:
    """Import every module declared in the entry-point ``group`` (once per process)."""
    if group in _loaded_groups:
        return
    _loaded_groups.add(group)
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            ep.load()
        except Exception as exc:  # a broken plugin must not take the harness down, but must be visible
            dist = getattr(ep, "dist", None)
            log.warning("plugin %r from %s failed to load: %s", ep.name, getattr(dist, "name", "?"), exc)


class Registry(Generic[T]):
    """A named collection of pluggable objects of one kind (verifiers, engines, decoders, ...)."""

    def __init__(self, kind: str, groups: tuple[str, ...] = (ENTRY_POINT_GROUP,)):
        self.kind, self.groups = kind, groups
        self._entries: dict[str, T | str] = {}
        self._declared: dict[str, T] = {}  # what each module import registered: survives snapshot()/restore()

    def register(self, name: str, obj: T | str | None = None, *, aliases: tuple[str, ...] = ()):
        """Register ``obj`` (or a lazy ``"module:attr"`` string) under ``name``; usable as a decorator."""

        def add(target: T | str) -> T | str:
            for key in (name, *aliases):
                current = self._entries.get(key)
                declared = isinstance(current, str) and ":" not in current and not isinstance(target, str)
                if current is not None and current is not target and not declared and not _same(current, target):
                    raise RegistryError(f"{self.kind} {key!r} is already registered to {_describe(current)}")
                self._entries[key] = target
                if declared:
                    self._declared[key] = target
            return target

        return add if obj is None else add(obj)

    def get(self, name: str) -> T:
        """Return the object registered as ``name``, importing it if it is lazy."""
        if name not in self._entries:
            self._load()
        if name not in self._entries:
            hint = did_you_mean(name, self.names())
            raise RegistryError(f"unknown {self.kind} {name!r}{hint} (available: {', '.join(self.names()) or 'none'})")
        entry = self._entries[name]
        if isinstance(entry, str) and ":" not in entry:  # the module registers the entry when imported
            _import(entry, self.kind, name)
            entry = self._entries[name] = self._declared.get(name, self._entries[name])  # imported before: kept
            if isinstance(entry, str):
                raise RegistryError(f"{self.kind} {name!r}: importing {entry} did not register it")
        if isinstance(entry, str):
            entry = self._entries[name] = _import(entry, self.kind, name)
        return entry  # type: ignore[return-value]

    def names(self) -> list[str]:
        """All registered names, plugins included, sorted."""
        self._load()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def _load(self) -> None:
        for group in self.groups:
            load_plugins(group)

    def snapshot(self) -> dict[str, T | str]:
        """A copy of the entries, for tests that register temporary objects."""
        return dict(self._entries)

    def restore(self, snapshot: dict[str, T | str]) -> None:
        """Put back the entries saved by :meth:`snapshot`."""
        self._entries = dict(snapshot)


def _import(ref: str, kind: str, name: str) -> Any:
    module, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else []:
            obj = getattr(obj, part)
    except ImportError as exc:
        raise RegistryError(f"{kind} {name!r} could not be imported from {ref}: {exc}") from exc
    except AttributeError as exc:
        raise RegistryError(f"{kind} {name!r}: {ref} does not exist ({exc})") from exc
    return obj


def _same(a: object, b: object) -> bool:
    """A lazy reference and the object it names count as the same registration."""
    if isinstance(a, str) and not isinstance(b, str):
        return a == f"{getattr(b, '__module__', '')}:{getattr(b, '__qualname__', '')}"
    if isinstance(b, str) and not isinstance(a, str):
        return _same(b, a)
    return False


def _describe(obj: object) -> str:
    return obj if isinstance(obj, str) else f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', obj)}"


# One registry per kind of pluggable thing. Benchmarks, suites and prompt templates are YAML data
# (configs/, read by harness/config.py), not registered code, so they have no registry here.
verifiers: Registry[Callable[..., Any]] = Registry("verifier")
engines: Registry[Callable[..., Any]] = Registry("engine")
metrics: Registry[Callable[..., Any]] = Registry("metric")
architectures: Registry[Callable[..., Any]] = Registry("architecture")
decoders: Registry[Callable[..., Any]] = Registry("decoder")
caches: Registry[Any] = Registry("KV cache")  # forward strategies of the cached engine (DecodingConfig.cache)
_TRAINING = (ENTRY_POINT_GROUP, TRAINING_GROUP)
algorithms: Registry[Callable[..., Any]] = Registry("algorithm", _TRAINING)
estimators: Registry[Callable[..., Any]] = Registry("likelihood estimator", _TRAINING)
# scoring estimators of log p(continuation | context) for likelihood-scored benchmarks (harness/likelihood.py)
likelihoods: Registry[Any] = Registry("scoring likelihood estimator")
# how a benchmark is run and scored, by its spec's ``task``: generate and verify, or score choices by likelihood
tasks: Registry[Any] = Registry("task type")
tasks.register("generate", "dare.harness.generate_run:GENERATE_TASK")
tasks.register("choice", "dare.harness.choice_run:CHOICE_TASK")
advantages: Registry[Callable[..., Any]] = Registry("advantage estimator", _TRAINING)
losses: Registry[Callable[..., Any]] = Registry("policy loss", _TRAINING)
