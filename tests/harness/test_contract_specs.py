"""Decoders, caches, estimators and algorithms are declared, typed specs, and nothing under backends/decoding or
trainers reads an untyped option.

A setting reaches a decoder, a cache, an estimator or an algorithm only through its typed Options (validated,
recorded, hashed): a module that reads ``DecodingConfig.extra`` or takes settings through ``**kwargs`` could
silently ignore or misrecord one. The walk covers every registered spec's modules and every module of the two
packages, so a new strategy that bypasses the contract fails here.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from dare.backends.decoding.spec import CacheSpec, DecoderSpec, decoder_specs
from dare.harness.options import Options
from dare.harness.records import DecodingConfig
from dare.harness.registry import advantages, algorithms, caches, decoders, estimators, load_plugins, losses

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("backends/decoding", "trainers")


def _untyped_reads(path: Path) -> list[str]:
    """``X.extra`` attribute reads and ``**kwargs`` parameters used for anything but passing them on verbatim."""
    tree, found = ast.parse(path.read_text(encoding="utf-8")), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "extra" and isinstance(node.ctx, ast.Load):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} reads .extra")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.args.kwarg is not None:
            name = node.args.kwarg.arg
            forwarded = {id(k.value) for call in ast.walk(node) if isinstance(call, ast.Call)
                         for k in call.keywords if k.arg is None and isinstance(k.value, ast.Name)}
            used = [n for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == name]
            if any(id(n) not in forwarded for n in used):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} reads settings from **{name}")
    return found


def test_no_module_of_the_decoders_or_trainers_reads_an_untyped_option():
    modules = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
    assert len(modules) > 20
    assert [hit for path in modules for hit in _untyped_reads(path)] == []


def test_the_walk_finds_what_it_looks_for(tmp_path):
    bad = ROOT / "backends/decoding/_probe_for_test.py"
    try:
        bad.write_text("def rule(cfg, **kw):\n    return cfg.extra.get('tau', kw.get('x'))\n\n"
                       "def passes(**kw):\n    return f(**kw)\n")
        assert [hit.split(" ", 1)[1] for hit in _untyped_reads(bad)] == ["reads settings from **kw", "reads .extra"]
    finally:
        bad.unlink()


def _spec_modules(spec) -> set[str]:
    parts = [spec.loop, spec.rule, spec.Options] if isinstance(spec, DecoderSpec) else [spec.forward, spec.Options]
    return {inspect.getsourcefile(p) for p in parts if p is not None and not isinstance(p, type(None))}


@pytest.mark.parametrize("name", sorted(decoder_specs()))
def test_every_registered_decoder_is_a_declared_spec(name):
    spec = decoders.get(name)
    assert isinstance(spec, DecoderSpec) and spec.name == name
    assert spec.reads <= set(DecodingConfig.model_fields) and {"gen_length", "remasking"} <= spec.reads
    assert set(spec.rules) <= spec.reads and spec.nfe
    assert issubclass(spec.Options, Options) and spec.Options()  # every option has its default, in the model
    assert spec.supports_cfg == ("cfg_scale" in spec.reads)
    for path in _spec_modules(spec):  # the loop, the rule and the Options of a spec read no untyped option
        assert _untyped_reads(Path(path)) == [], path


@pytest.mark.parametrize("name", sorted(caches.names()))
def test_every_registered_cache_is_a_declared_spec(name):
    spec = caches.get(name)
    assert isinstance(spec, CacheSpec) and spec.name == name and spec.families <= {"mdm", "dream"}
    assert spec.Options is None or (issubclass(spec.Options, Options) and spec.Options())
    assert spec.unread <= set(DecodingConfig.model_fields)
    assert all(_untyped_reads(Path(path)) == [] for path in _spec_modules(spec))


def test_aliases_are_the_same_spec():
    assert decoders.get("dream:low_confidence") is decoders.get("dream:maskgit_plus")
    assert decoders.get("block:threshold") is decoders.get("block:low_confidence_dynamic")
    assert "dream:low_confidence" not in decoder_specs()


def _typed(model) -> bool:
    """A pydantic model that refuses unknown keys and builds with its defaults alone."""
    return model.model_config.get("extra") == "forbid" and model.model_fields is not None


@pytest.mark.parametrize("name", sorted(set(algorithms.names())))
def test_every_registered_algorithm_is_typed_and_reads_typed_settings(name):
    load_plugins()
    cls = algorithms.get(name)
    assert _typed(cls.Config) and cls.Config()  # settings: a validated model with every default
    assert cls.policy_loss in losses, (name, cls.policy_loss)  # its loss is a registered one
    if "advantage" in cls.Config.model_fields:  # policy-gradient algorithms name a registered estimator of it
        assert cls.Config().advantage in advantages
    assert _untyped_reads(Path(inspect.getsourcefile(cls))) == []


@pytest.mark.parametrize("name", sorted(set(estimators.names())))
def test_every_registered_estimator_has_typed_options(name):
    load_plugins()
    cls = estimators.get(name)
    assert _typed(cls.Options) and cls.Options()
    assert _untyped_reads(Path(inspect.getsourcefile(cls))) == []


def test_losses_and_advantages_are_registered_functions_reading_typed_settings():
    load_plugins()
    assert {"grpo", "mean_baseline", "rloo", "population"} <= set(advantages.names())
    assert len(losses.names()) >= 8
    for registry in (losses, advantages):
        for name in registry.names():
            assert _untyped_reads(Path(inspect.getsourcefile(registry.get(name)))) == [], name
