"""The typed, versioned records that flow through the harness and land in run directories.

``Sample`` (a benchmark item) -> ``Generation`` (one of k model outputs) -> ``Verdict`` (the verifier's
decision) -> ``MetricValue`` aggregates inside a ``RunRecord`` (``run.json``). ``DecodingConfig`` holds
every knob that changes a score; its :meth:`~DecodingConfig.config_hash` is the leaderboard's
comparability key and part of the generation-cache key. Changing a serialised field means bumping
:data:`SCHEMA_VERSION` and adding a step to :func:`migrate_run`.

Schema 2 records the engine, the decoder and every verifier as (name, version, options), the engine
settings that can change tokens (``engine_identity``) and only the decoding fields the decoder read.

The run's own facts are typed (:mod:`.run_facts`): ``model.training`` (:class:`TrainingLink`, with its
:class:`CurvePoint` rows), ``timing`` (:class:`Timing`) and ``environment`` (:class:`Environment`); they
serialise to the same JSON schema 2 has always held. The dict fields left are open by design: what they hold is defined
by a plugin (an engine's options and identity, a verifier's options and details, a data row), and each
says so in its description.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

# the base and the run's own facts are re-exported: every record is importable from here
from .record_base import GivenFieldsRecord, JsonDict, Record, canonical_json, json_text, sha256_text  # noqa: F401
from .run_facts import (  # noqa: F401
    BenchmarkTiming,
    CurvePoint,
    Environment,
    EstimatorLink,
    Execution,
    RolloutLink,
    Timing,
    TrainingLink,
)

SCHEMA_VERSION = 2


class Message(Record):
    """One chat turn. A trailing ``assistant`` turn is a prefix the model continues (MBPP's ``[BEGIN]``)."""

    role: Literal["system", "user", "assistant"]
    content: str


class Sample(Record):
    """One benchmark item. ``reference`` is the gold answer (math, countdown target, sudoku grid) or the
    reference solution for code; ``metadata`` holds the rest of the data row (tests, numbers, puzzle)."""

    id: str
    prompt: str
    reference: str | None = None
    metadata: JsonDict = Field(default_factory=dict)
    """The rest of the data row; open: each suite's rows have their own fields."""


class DecodingConfig(Record):
    """Every decoding setting that can change a score. Trainers' rollouts use this same class.

    ``batch_size`` is recorded but excluded from :meth:`config_hash`: decoding is batch-invariant by
    contract (tested), so a rerun with another batch size reuses the cache and stays comparable.
    """

    gen_length: int = Field(256, ge=1, description="number of generated tokens (the canvas length)")
    steps: int = Field(256, ge=1, description="total denoising steps over the whole canvas")
    block_length: int = Field(32, ge=1, description="semi-autoregressive block size (= gen_length for one block)")
    remasking: str = Field("low_confidence",
                           description="unmasking strategy: low_confidence, random, entropy, margin, ...")
    threshold: float | None = Field(None, gt=0, le=1, description="parallel commit: all tokens with confidence >= tau")
    factor: float | None = Field(None, gt=0, description="Fast-dLLM factor-based parallel commit")
    temperature: float = Field(0.0, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=1)
    cfg_scale: float = Field(0.0, ge=0, description="classifier-free guidance scale (0 = off)")
    alg_temp: float | None = Field(None, ge=0,
                                   description="Dream: temperature of the confidence used to pick positions")
    stop_at_eos: bool = Field(True, description="truncate the text at the first EOS token")
    num_samples: int = Field(1, ge=1, description="k generations per sample (pass@k)")
    seed: int = Field(0, description="base seed; each (sample, index) derives its own")
    cache: str = Field("none", min_length=1, description="KV cache of the cached engine: none or a name in "
                       "registry.caches (prefix, dual, dkv, plugins); the engine refuses a name it does not have")
    batch_size: int = Field(1, ge=1, description="execution only: not part of config_hash")
    extra: JsonDict = Field(default_factory=dict, description="engine-specific options, namespaced by engine; open: "
                            "each decoder's Options class types its own, and the dict is hashed as given")

    @model_validator(mode="before")
    @classmethod
    def _check_stored_hash(cls, data: Any) -> Any:
        # run.json stores config_hash beside the fields; on load it must agree with them.
        if isinstance(data, dict) and "config_hash" in data:
            data = dict(data)
            stored = data.pop("config_hash")
            computed = cls.model_validate(data).config_hash()
            if stored != computed:
                raise ValueError(f"config_hash {stored!r} does not match the decoding fields ({computed!r})")
        return data

    @model_validator(mode="after")
    def _check_blocks(self) -> DecodingConfig:
        if self.gen_length % self.block_length:
            raise ValueError(
                f"gen_length={self.gen_length} is not divisible by block_length={self.block_length}; "
                "pick a block_length that divides gen_length"
            )
        return self

    def extra_with(self, options: dict[str, Any]) -> JsonDict | None:
        """``extra`` with decoder ``options`` merged in (a caller's additions, validated later by the resolver
        against the decoder's Options), or None when that changes nothing."""
        merged = {**self.extra, **options}
        return merged if merged != self.extra else None

    def config_hash(self) -> str:
        """Short sha256 of the semantic fields (everything except ``batch_size``)."""
        return sha256_text(canonical_json(self.model_dump(exclude={"batch_size"})))[:16]

    def to_record(self, fields: list[str] | None = None) -> JsonDict:
        """The serialised form used in run.json: the fields (only ``fields`` when given: the ones the
        decoder read, the others being at their defaults) plus ``config_hash``."""
        data = self.model_dump()
        if fields is not None:
            data = {k: v for k, v in data.items() if k in fields}
        return {**data, "config_hash": self.config_hash()}


class Trajectory(Record):
    """How a diffusion decoder produced a sequence: for generated position i, the step at which it was
    committed (``commit_step[i]``) and its block (``block[i]``). Shapes: both ``(gen_length,)``."""

    commit_step: list[int]
    block: list[int]
    nfe: int


class Generation(Record):
    """One model output for one sample (index ``index`` of k)."""

    sample_id: str
    index: int = 0
    text: str
    token_ids: list[int] | None = None
    finish_reason: Literal["stop", "length", "error", "replay"] = "stop"
    nfe: int | None = Field(None, description="forward passes spent on this output")
    nfe_official: int | None = Field(None, description="forward passes the decoder family's official code runs for "
                                     "the same output (None: as nfe); the decoder module states the rule")
    latency_s: float | None = None
    trajectory: Trajectory | None = None
    error: str | None = None


class Verdict(Record):
    """A verifier's decision. ``status="error"`` is an infrastructure failure (grader crashed or timed out
    on its own side): never counted as a model failure. ``unscored`` is excluded from metrics."""

    score: float = 0.0
    passed: bool = False
    answer: str | None = None
    status: Literal["scored", "unscored", "error"] = "scored"
    details: JsonDict = Field(default_factory=dict)
    """What the verifier wants a reader to see (mode, extracted parts, the error); open: each verifier,
    plugins included, writes its own keys."""

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("score must be finite")
        return v


class MetricValue(Record):
    """A metric with its bootstrap 95% interval and the number of samples it is over."""

    value: float
    ci: tuple[float, float]
    n: int


class BenchmarkInfo(Record):
    """What a benchmark in a run was: data, prompt and verifier identity.

    ``dataset_version`` is optional and absent from the JSON when not recorded (records written before it):
    such run.json files load and write back byte for byte, so no schema bump. It is descriptive: the data
    sha256 decides what was scored (and keys the verdict cache); the version says which release that is.
    """

    name: str
    version: str = Field(description="the benchmark config's own version")
    data_file: str
    dataset_version: str | None = Field(None, description="the data release the file holds, from the benchmark "
                                        "config (EvalPlus v0.2.0, ...); None: not recorded (an older run)")
    data_sha256: str
    n_total: int
    n_used: int
    prompt_template: str
    prompt_template_hash: str
    verifier: str
    verifier_version: str
    verifier_args: JsonDict = Field(default_factory=dict, description="the benchmark spec's arguments to its verifier; "
                                    "open: the verifier's Options class types them")
    verifier_options: JsonDict = Field(default_factory=dict, description="every option the verdicts depend on, "
                                       "defaults included (the verdict cache key); open, as verifier_args")
    estimator: ComponentInfo | None = Field(None, description="a likelihood-scored benchmark's estimator (name, "
                                            "version, options); None: a generated benchmark")
    fewshot: JsonDict | None = Field(None, description="a likelihood-scored benchmark's contexts: few-shot file, its "
                                     "sha256, count, sampler and seed, delimiters; None: a generated benchmark")

    @model_serializer(mode="wrap")
    def _version_when_recorded(self, handler: SerializerFunctionWrapHandler) -> JsonDict:
        # an older record has none of these keys: writing null would change its bytes
        data = handler(self)
        for key in ("dataset_version", "estimator", "fewshot"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class ModelInfo(Record):
    """The model a run scored. ``fingerprint`` covers config, tokenizer and weight files."""

    name: str
    path: str | None = None
    architecture: str | None = None
    fingerprint: str
    fingerprint_parts: JsonDict = Field(default_factory=dict)
    """The hashes ``fingerprint`` is taken over, per file (size and partial hash for weights); open: each
    engine fingerprints the files its models have (a replay run: its completions file)."""
    training: TrainingLink | None = None
    """For trained checkpoints: the training run they came from (None: not trained by a recorded run)."""


class ComponentInfo(Record):
    name: str
    version: str
    options: JsonDict = Field(default_factory=dict, description="the component's resolved options; open: each engine, "
                              "decoder and verifier (plugins included) declares its own Options class")
    rules: dict[str, str] = Field(default_factory=dict, description="a decoder's rule for each DecodingConfig field "
                                  "whose meaning differs between decoders (threshold, factor)")


class RunRecord(Record):
    """Everything needed to trust, compare and rerun one evaluation. Written as ``run.json``."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    status: Literal["complete", "partial", "failed"]
    created_at: str
    finished_at: str | None = None
    suite: str
    benchmarks: dict[str, BenchmarkInfo]
    model: ModelInfo
    backend: ComponentInfo
    decoder: ComponentInfo | None = Field(None, description="the decoder the engine ran (None: replay, external tools)")
    engine_identity: JsonDict = Field(default_factory=dict, description="engine settings that can change tokens "
                                      "(dtype, kernel, device class): part of the generation cache key; open: "
                                      "each engine declares its own")
    decoding_fields: list[str] | None = Field(None, description="the DecodingConfig fields the run used (None: all)")
    decoding: DecodingConfig
    metrics: dict[str, dict[str, MetricValue]]
    counts: dict[str, dict[str, int]] = Field(default_factory=dict,
                                              description="per benchmark: scored/error/unscored/generated/cached")
    isolation: JsonDict = Field(default_factory=dict, description="per benchmark, the isolation its verifier declared "
                                "(code-execution layers that were active, or its rules); open: verifier-defined")
    flags: list[str] = Field(default_factory=list,
                             description="notable run conditions, e.g. unsafe-local-exec, limit=N")
    timing: Timing = Field(default_factory=Timing, description="wall-clock seconds per benchmark and in all")
    environment: Environment = Field(default_factory=Environment, description="software and machine the run ran on")
    command: list[str] = Field(default_factory=list)
    samples_path: str = "samples.jsonl"
    execution: Execution | None = Field(None, description="workers, restart budget and restarts of a run spread over "
                                        "Ray workers; absent for a run in one process (and in older records)")

    @model_serializer(mode="wrap")
    def _execution_when_recorded(self, handler: SerializerFunctionWrapHandler) -> JsonDict:
        # absent, not null, when there is none: older run.json files load and write back byte for byte
        data = handler(self)
        if data.get("execution") is None:
            data.pop("execution", None)
        return data

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, v: int) -> int:
        if v > SCHEMA_VERSION:
            raise ValueError(f"schema_version {v} is newer than this dare ({SCHEMA_VERSION}); upgrade dare-dllm")
        return v

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return migrate_run(data) if isinstance(data, dict) else data

    def to_json(self) -> JsonDict:
        data = self.model_dump(mode="json")
        data["decoding"] = self.decoding.to_record(self.decoding_fields)
        return data


def migrate_run(data: JsonDict) -> JsonDict:
    """An older run.json as the current schema. 1 -> 2: the engine's recorded options become its identity
    (schema 1 recorded no dtype: such runs used the default) and each benchmark's verifier arguments its
    options; no decoder was recorded."""
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version >= SCHEMA_VERSION:
        return data
    data = dict(data)
    if version < 2:
        backend = data.get("backend") if isinstance(data.get("backend"), dict) else {}
        data.setdefault("engine_identity", dict(backend.get("options") or {}))
        benchmarks = data.get("benchmarks")
        if isinstance(benchmarks, dict):
            data["benchmarks"] = {name: {**info, "verifier_options": dict(info.get("verifier_args") or {})}
                                  if isinstance(info, dict) and "verifier_options" not in info else info
                                  for name, info in benchmarks.items()}
    data["schema_version"] = SCHEMA_VERSION
    return data
