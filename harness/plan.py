"""The one entry point: ``dare.plan(...)`` resolves everything an evaluation needs, ``dare.evaluate(plan)`` runs it.

    import dare
    p = dare.plan(model="tiny-sdar", suite="sudoku", overrides=["engine.dtype=bfloat16"], limit=5)
    print(dare.describe(p))                  # what --dry-run prints: nothing is generated
    record = dare.evaluate(p)                # -> RunRecord (run.json); p.run_dir is the run directory

dare-eval, dare-train's automatic evaluation, ``--compare``, the OpenCompass bridge and ``--workers`` all
come through here, and the decoding through the one resolver (:func:`dare.harness.resolve.resolve_decoding`: the
model's settings for the suite, then the engine's defaults, then the caller's, checked against the decoder
the engine declares), so two configs share a hash exactly when the decoder sees the same settings. The engine's and every verifier's options are typed (unknown keys refused
with a did-you-mean) and recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import config as cfg
from . import overrides as overrides_lib
from .cliutil import check_device
from .data import load_rows
from .engine import EngineBase, EngineContext
from .errors import ConfigError, InputError
from .models import ResolvedModel, resolve
from .options import capabilities, parse_options
from .records import DecodingConfig, RunRecord
from .resolve import resolve_decoding
from .registry import did_you_mean, engines
from .runner import EvalPlan, run_eval
from .rundir import check_writable
from .verifiers import verifiers
from .verifiers.base import verifier_options

def _options(engine_cls: Any, values: dict[str, Any]) -> Any:
    """Typed options for engines that declare them (EngineBase subclasses); the dict for the others."""
    if isinstance(engine_cls, type) and issubclass(engine_cls, EngineBase):
        return parse_options(engine_cls.Options, values, "engine")
    return dict(values)


def _verifier_options(suite: cfg.SuiteSpec, given: dict[str, Any], flags: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per benchmark, its verifier's full options. A given option goes to every verifier that declares it
    (and to plugins that declare none); one that no verifier of the suite knows is refused. ``flags``
    (``--unsafe-local-exec``) go to the verifiers that declare them and are not an error elsewhere."""
    out, known = {}, set()
    given = {**{k: v for k, v in flags.items() if k not in given}, **given}
    for name in suite.benchmarks:
        spec = cfg.benchmark(name)
        cls = verifiers.get(spec.verifier)
        fields = set(cls.Options.model_fields) if cls.Options is not None else set(given) - set(flags)
        known |= fields
        out[name] = verifier_options(cls, {**spec.verifier_args, **{k: v for k, v in given.items() if k in fields}})
    unknown = sorted(set(given) - known - set(flags))
    if unknown:
        fields = sorted(known)
        raise ConfigError([f"verifier.{k}: unknown option{did_you_mean(k, fields)} (options: {', '.join(fields) or 'none'})"
                           for k in unknown], source="--set")
    return out


def plan(model: str | None = None, suite: str | None = None, engine: str = "torch",
         overrides: Sequence[str] | None = None, *, model_path: str | Path | None = None,
         spec: cfg.ModelSpec | None = None, label: str | None = None, completions: str | Path | None = None, limit: int | None = None,
         seed: int | None = None, device: str | None = None, out: str | Path = "runs",
         cache_dir: str | Path | None = None, workers: int = 1, unsafe_local_exec: bool = False,
         decoding: dict[str, Any] | DecodingConfig | None = None, engine_options: dict[str, Any] | None = None,
         verifier_options: dict[str, Any] | None = None, training: dict[str, Any] | None = None,
         command: Sequence[str] = (), progress=None) -> EvalPlan:
    """Resolve and validate an evaluation without generating anything (see the module doc).

    ``overrides`` are ``KEY=VALUE`` strings as for ``--set``; ``decoding``, ``engine_options`` and
    ``verifier_options`` the same settings as dicts (``overrides`` win). ``spec`` with ``model_path``
    evaluates a checkpoint under the settings of a known model while recording it as ``model`` (a trained
    checkpoint); ``training`` links the record to the run that produced it.
    """
    if not suite:
        raise InputError("no suite given; pass --suite NAME (see dare-eval --list)")
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    suite_spec = cfg.suite(suite)
    check_device(device)
    if model_path and not Path(model_path).expanduser().is_dir():
        resolve(model, str(model_path))  # a bad path is reported before any engine is imported
    engine_cls = engines.get(engine)
    caps = capabilities(engine_cls)
    sets = overrides_lib.parse(list(overrides or []))
    given = dict(decoding) if isinstance(decoding, dict) else {}
    explicit = set(given) | set(sets.decoding) | ({"seed"} if seed is not None else set())
    given.update(sets.decoding)
    if seed is not None:
        given["seed"] = seed
    if completions and not caps.reads_completions:
        raise InputError(f"--completions is only read by --backend replay (or opencompass), not {engine!r}")
    if model_path is not None and (spec is not None or label is not None):
        resolved = ResolvedModel(label or model or spec.name, spec, Path(model_path))
    else:
        label = model
        if not caps.needs_checkpoint and not label and not model_path:
            label = f"{engine}:{Path(completions).stem}" if completions else engine
        resolved = resolve(label, str(model_path) if model_path else None, caps.needs_checkpoint)
    options = _options(engine_cls, {**(engine_options or {}), **sets.engine})
    given_verifier = {**(verifier_options or {}), **sets.verifier}
    flags = [f"limit={limit}"] if limit is not None else []
    if unsafe_local_exec:
        flags.append("unsafe-local-exec")
    verifier_opts = _verifier_options(suite_spec, given_verifier, {"unsafe_local_exec": True} if unsafe_local_exec else {})
    out = Path(out)
    check_writable(out)
    sample_ids = frozenset(str(row["id"]) for b in suite_spec.benchmarks for row in load_rows(cfg.benchmark(b).data))
    ctx = EngineContext(model_name=resolved.name, model_spec=resolved.spec, model_path=resolved.path,
                        completions=Path(completions) if completions else None, device=device,
                        options=options, sample_ids=sample_ids)
    if workers != 1:
        from .parallel import ParallelEngine  # Ray only when asked for

        built = ParallelEngine(engine, ctx, workers)
    else:
        built = engine_cls(ctx)  # cheap: engines load weights lazily, in prepare(), after these checks
    base = decoding if isinstance(decoding, DecodingConfig) else None
    run = resolve_decoding(built, resolved.spec, suite_spec.name, given, explicit=explicit, base=base)
    return EvalPlan(
        suite=suite_spec, decoding=run.config, engine=built, model_name=resolved.name, out_dir=out,
        cache_dir=Path(cache_dir) if cache_dir else out / ".cache", limit=limit, verifier_options=verifier_opts,
        flags=flags, command=list(command), progress=progress, decoder=run.decoder, decoder_options=run.options,
        decoding_fields=run.fields, training=training,
    )


def evaluate(plan: EvalPlan) -> RunRecord:
    """Run ``plan`` (generations cache-first, verdicts, metrics) and return its record; ``plan.run_dir``
    names the run directory. Engines that run the whole plan themselves (``capabilities.own_loop``:
    OpenCompass) write the same record."""
    run_dir = plan.engine.run_eval(plan) if capabilities(plan.engine).own_loop else run_eval(plan)
    plan.run_dir = run_dir
    return RunRecord.model_validate_json((run_dir / "run.json").read_text(encoding="utf-8"))
