"""The one entry point: ``dare.plan(request)`` resolves everything an evaluation needs, ``dare.evaluate(plan)`` runs it.

    import dare
    p = dare.plan(model="tiny-sdar", suite="sudoku", overrides=["engine.dtype=bfloat16"], limit=5)
    # the same: dare.plan(dare.EvalRequest(model="tiny-sdar", suite="sudoku", ...))
    print(dare.describe(p))                  # what --dry-run prints: nothing is generated
    record = dare.evaluate(p)                # -> RunRecord (run.json); p.run_dir is the run directory

dare-eval, dare-train's automatic evaluation, ``--compare``, the OpenCompass engine and ``--workers`` all
come through here with an :class:`EvalRequest`, and the decoding through the one resolver
(:func:`dare.harness.resolve.resolve_decoding`: the model's settings for the suite, then the engine's
defaults, then the caller's, checked against the decoder the engine declares), so two configs share a hash
exactly when the decoder sees the same settings. The engine's and every verifier's options are typed
(unknown keys refused with a did-you-mean) and recorded. Planning loads no weights and starts no worker;
:func:`evaluate` does. It writes nothing, except a file a decoder derives once per tokenizer into the cache
directory (PC-Sampler's background table where none ships for the model's tokenizer).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import config as cfg
from . import overrides as overrides_lib
from .choice_run import resolve_choices
from .cliutil import check_device
from .data import iter_rows
from .engine import EngineBase, EngineContext
from .errors import ConfigError, InputError
from .keyindex import SortedKeys
from .models import ResolvedModel, resolve
from .options import capabilities, parse_options
from .parallel import DEFAULT_WORKER_RESTARTS, ParallelEngine, check_worker_restarts, check_workers
from .records import DecodingConfig, RunRecord, TrainingLink
from .registry import did_you_mean, engines
from .resolve import resolve_decoding
from .rundir import check_writable
from .runner import EvalPlan, run_eval
from .verifiers import verifiers
from .verifiers.base import verifier_options


def typed_engine_options(engine_cls: Any, values: dict[str, Any], source: str = "--set") -> Any:
    """Typed options for engines that declare them (EngineBase subclasses); the dict for the others."""
    if isinstance(engine_cls, type) and issubclass(engine_cls, EngineBase):
        return parse_options(engine_cls.Options, values, "engine", source)
    return dict(values)


def _verifier_options(suite: cfg.SuiteSpec, given: dict[str, Any], flags: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per benchmark, its verifier's full options. A given option goes to every verifier that declares it
    (and to plugins that declare none); one that no verifier of the suite knows is refused. ``flags``
    (``--unsafe-local-exec``) go to the verifiers that declare them and are not an error elsewhere."""
    out, known = {}, set()
    given = {**{k: v for k, v in flags.items() if k not in given}, **given}
    for name in suite.benchmarks:
        spec = cfg.benchmark(name)
        if spec.verifier is None:  # a likelihood-scored benchmark: no verifier
            continue
        cls = verifiers.get(spec.verifier)
        fields = set(cls.Options.model_fields) if cls.Options is not None else set(given) - set(flags)
        known |= fields
        out[name] = verifier_options(cls, {**spec.verifier_args, **{k: v for k, v in given.items() if k in fields}})
    unknown = sorted(set(given) - known - set(flags))
    if unknown:
        fields = sorted(known)
        raise ConfigError([f"verifier.{k}: unknown option{did_you_mean(k, fields)} "
                           f"(options: {', '.join(fields) or 'none'})" for k in unknown], source="--set")
    return out


@dataclass(frozen=True)
class EvalRequest:
    """What a caller asks :func:`plan` to resolve: the flags of dare-eval, as one typed value."""

    model: str | None = None
    """Model config name or alias (a free label for engines without a checkpoint, e.g. replay)."""
    suite: str | None = None
    """Suite name (or a single benchmark's), from configs/suites."""
    engine: str = "torch"
    """Engine registry name (``--backend``)."""
    overrides: tuple[str, ...] = ()
    """``KEY=VALUE`` settings as for ``--set`` (decoding fields, ``engine.X``, ``verifier.X``); they win over the
    dicts below."""
    model_path: str | Path | None = None
    """A checkpoint directory (with ``spec``: a trained checkpoint evaluated under a known model's settings)."""
    spec: cfg.ModelSpec | None = None
    """The model config whose settings apply to ``model_path`` (the record names the model ``label``)."""
    label: str | None = None
    """The model's name in records when ``model_path`` and ``spec`` are given."""
    completions: str | Path | None = None
    """A completions file for engines that read one (replay, opencompass over replay)."""
    limit: int | None = None
    """The first N samples of each benchmark (None: all)."""
    seed: int | None = None
    """Decoding seed (set explicitly, like ``--set seed=N``)."""
    device: str | None = None
    """Device for the engine (``cpu``, ``cuda``, ``cuda:1``; None: the engine's choice)."""
    out: str | Path = "runs"
    """The directory that receives run directories."""
    cache_dir: str | Path | None = None
    """Generation and verdict caches (None: ``<out>/.cache``)."""
    workers: int = 1
    """Engine replicas; more than one run as Ray actors, started by :func:`evaluate`."""
    worker_restarts: int = DEFAULT_WORKER_RESTARTS
    """Dead replicas replaced (their unfinished work run again) before the run stops; execution only."""
    unsafe_local_exec: bool = False
    """Let code verifiers run candidates without isolation (recorded as a flag)."""
    decoding: dict[str, Any] | DecodingConfig | None = None
    """Decoding fields (a dict), or a complete DecodingConfig to start from instead of the model's settings."""
    engine_options: dict[str, Any] | None = None
    """``engine.X`` settings as a dict."""
    verifier_options: dict[str, Any] | None = None
    """``verifier.X`` settings as a dict."""
    training: TrainingLink | dict[str, Any] | None = None
    """The training run that produced ``model_path`` (recorded under ``model.training``)."""
    command: tuple[str, ...] = ()
    """The command line recorded in run.json."""
    progress: Any = None
    """``(description, total) -> bar`` with ``update(n)`` and ``close()``; None: no progress bars."""
    dry_run: bool = False
    """Only plan: a known model whose weights are not found is planned from its model config alone."""

    def __post_init__(self):
        object.__setattr__(self, "overrides", tuple(self.overrides or ()))
        object.__setattr__(self, "command", tuple(self.command or ()))


def plan(request: EvalRequest | str | None = None, /, *positional: Any, **keywords: Any) -> EvalPlan:
    """Resolve and validate an evaluation without generating anything (see the module doc).

    Takes an :class:`EvalRequest`, or its fields (``dare.plan(model=..., suite=...)``; model, suite, engine and
    overrides also by position). No weights are loaded and no worker starts (``workers`` > 1 start in
    :func:`evaluate`); nothing is written but a decoder's file derived for the model's tokenizer into the cache
    directory (see the module doc). ``overrides win over the ``decoding``, ``engine_options``
    and ``verifier_options`` dicts. ``spec`` with ``model_path`` evaluates a checkpoint under the settings of a
    known model while recording it as ``label`` (a trained checkpoint); ``training`` links the record to the
    run that produced it.
    """
    if isinstance(request, EvalRequest):
        if positional or keywords:
            raise TypeError("plan() takes an EvalRequest or the request's fields, not both")
        return _resolve(request)
    given = ((request,) if request is not None else ()) + positional  # the positional form: model, suite, ...
    if len(given) > len(POSITIONAL):
        raise TypeError(f"plan() takes at most {len(POSITIONAL)} positional fields ({', '.join(POSITIONAL)})")
    return _resolve(EvalRequest(**dict(zip(POSITIONAL, given)), **keywords))


#: the fields ``plan()`` also takes by position, in this order (its signature before EvalRequest)
POSITIONAL = ("model", "suite", "engine", "overrides")


def _resolve(r: EvalRequest) -> EvalPlan:
    if not r.suite:
        raise InputError("no suite given; pass --suite NAME (see dare-eval --list)")
    if r.limit is not None and r.limit < 1:
        raise InputError(f"--limit must be at least 1, got {r.limit}")
    if r.workers != 1:
        check_workers(r.workers)  # Ray's presence; it starts in evaluate()
    check_worker_restarts(r.worker_restarts)
    suite_spec = cfg.suite(r.suite)
    check_device(r.device)
    if r.model_path and not Path(r.model_path).expanduser().is_dir():
        resolve(r.model, str(r.model_path))  # a bad path is reported before any engine is imported
    engine_cls = engines.get(r.engine)
    caps = capabilities(engine_cls)
    sets = overrides_lib.parse(list(r.overrides))
    given = dict(r.decoding) if isinstance(r.decoding, dict) else {}
    explicit = set(given) | set(sets.decoding) | ({"seed"} if r.seed is not None else set())
    given.update(sets.decoding)
    if r.seed is not None:
        given["seed"] = r.seed
    if r.completions and not caps.reads_completions:
        raise InputError(f"--completions is only read by --backend replay (or opencompass), not {r.engine!r}")
    if r.model_path is not None and (r.spec is not None or r.label is not None):
        resolved = ResolvedModel(r.label or r.model or r.spec.name, r.spec, Path(r.model_path))
    else:
        label = r.model
        if not caps.needs_checkpoint and not label and not r.model_path:
            label = f"{r.engine}:{Path(r.completions).stem}" if r.completions else r.engine
        resolved = resolve(label, str(r.model_path) if r.model_path else None, caps.needs_checkpoint, r.dry_run)
    options = typed_engine_options(engine_cls, {**(r.engine_options or {}), **sets.engine})
    given_verifier = {**(r.verifier_options or {}), **sets.verifier}
    flags = [f"limit={r.limit}"] if r.limit is not None else []
    if r.unsafe_local_exec:
        flags.append("unsafe-local-exec")
    verifier_opts = _verifier_options(suite_spec, given_verifier,
                                      {"unsafe_local_exec": True} if r.unsafe_local_exec else {})
    out = Path(r.out)
    check_writable(out)
    # every id of the suite (replay tells an unknown id from one outside --limit), as digests: 16 bytes an id
    sample_ids = SortedKeys.of(str(row["id"]) for b in suite_spec.benchmarks
                               for row in iter_rows(cfg.benchmark(b).data))
    cache_dir = Path(r.cache_dir) if r.cache_dir else out / ".cache"
    ctx = EngineContext(model_name=resolved.name, model_spec=resolved.spec, model_path=resolved.path,
                        completions=Path(r.completions) if r.completions else None, device=r.device,
                        options=options, sample_ids=sample_ids, cache_dir=cache_dir)
    # cheap: engines load weights lazily, in prepare(), after these checks. With workers the replicas are
    # built from the same context in evaluate(); this instance answers the decoder they declare.
    built = engine_cls(ctx)
    base = r.decoding if isinstance(r.decoding, DecodingConfig) else None
    run = resolve_decoding(built, resolved.spec, suite_spec.name, given, explicit=explicit, base=base)
    choices = resolve_choices(built, resolved.spec, suite_spec, sets.likelihood, sets.choice)
    return EvalPlan(
        suite=suite_spec, decoding=run.config, engine=built, model_name=resolved.name, out_dir=out,
        cache_dir=cache_dir, limit=r.limit, verifier_options=verifier_opts,
        flags=flags, command=list(r.command), progress=r.progress, decoder=run.decoder, decoder_options=run.options,
        decoding_fields=run.fields, training=r.training, workers=r.workers,
        worker_restarts=r.worker_restarts, engine_name=r.engine, engine_context=ctx,
        choices=choices,
    )


def evaluate(plan: EvalPlan) -> RunRecord:
    """Run ``plan`` (generations cache-first, verdicts, metrics) and return its record; ``plan.run_dir``
    names the run directory. With ``plan.workers`` > 1 the engine replicas start here (Ray actors)."""
    running = plan
    if plan.workers != 1:  # Ray is imported only here, when the workers start
        running = replace(plan, engine=ParallelEngine(plan.engine_name, plan.engine_context, plan.workers,
                                                      plan.worker_restarts))
    try:
        run_dir = run_eval(running)
    finally:
        plan.run_dir = running.run_dir  # also when interrupted: the caller names the partial run
        if running is not plan:
            running.engine.close()
    return RunRecord.model_validate_json((run_dir / "run.json").read_text(encoding="utf-8"))
