"""The typed, versioned records that flow through the harness and land in run directories.

``Sample`` (a benchmark item) -> ``Generation`` (one of k model outputs) -> ``Verdict`` (the verifier's
decision) -> ``MetricValue`` aggregates inside a ``RunRecord`` (``run.json``). ``DecodingConfig`` holds
every knob that changes a score; its :meth:`~DecodingConfig.config_hash` is the leaderboard's
comparability key and part of the generation-cache key. Changing a serialised field means bumping
:data:`SCHEMA_VERSION` and adding a step to :func:`migrate_run`.

Schema 2 records the engine, the decoder and every verifier as (name, version, options), the engine
settings that can change tokens (``engine_identity``) and only the decoding fields the decoder read.

The run's own facts are typed: ``model.training`` (:class:`TrainingLink`, with its :class:`CurvePoint`
rows), ``timing`` (:class:`Timing`) and ``environment`` (:class:`Environment`); they serialise to the
same JSON schema 2 has always held. The dict fields left are open by design: what they hold is defined
by a plugin (an engine's options and identity, a verifier's options and details, a data row), and each
says so in its description.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

SCHEMA_VERSION = 2

JsonDict = dict[str, Any]


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the form every hash in the project is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    # surrogatepass: a lone surrogate (replayed completion text can hold one) hashes instead of raising;
    # every other string hashes exactly as plain UTF-8
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def json_text(obj: Any, **kwargs: Any) -> str:
    """JSON as readable UTF-8 text, for the files a run writes. A string holding a lone surrogate cannot be
    UTF-8, so such a document is written ASCII-escaped instead (``\\ud800``): it still encodes, and reads back
    to the same string."""
    text = json.dumps(obj, ensure_ascii=False, **kwargs)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, ensure_ascii=True, **kwargs)
    return text


class Record(BaseModel):
    """Base of every serialised record: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class GivenFieldsRecord(Record):
    """A record that serialises only the fields it was given (a ``None`` given stays ``null``): run.json
    tells "not recorded" (key absent) from "recorded as unknown" (``null``), as it did when these were dicts."""

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> JsonDict:
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}


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
    """What a benchmark in a run was: data, prompt and verifier identity."""

    name: str
    version: str
    data_file: str
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


class CurvePoint(GivenFieldsRecord):
    """One logged training step in :attr:`TrainingLink.curve` (supervised and preference steps have no reward)."""

    step: int
    """The optimiser step the row was logged at."""
    reward: float | None = None
    """Mean task reward of the step's rollouts."""
    accuracy: float | None = None
    """Share of the step's rollouts that passed."""
    loss: float | None = None
    """The step's training loss."""


class EstimatorLink(Record):
    """The likelihood estimator a training run used (``model.training.estimator``)."""

    name: str
    """Registry name of the estimator (what the algorithm's ``auto`` resolved to, or the one configured)."""
    options: JsonDict = Field(default_factory=dict)
    """Its options; open: each estimator, plugins included, declares its own."""


class RolloutLink(Record):
    """What a training run's rollouts decoded with (``model.training.rollout``, also ``RUN/rollout.json``)."""

    decoding: JsonDict
    """The rollout DecodingConfig's fields the decoder reads (as run.json's ``decoding``, without the hash)."""
    config_hash: str
    """The rollout DecodingConfig's hash."""
    decoder: str | None = None
    """The decoder the engine declared for it (None: the engine declares none)."""
    decoder_options: JsonDict | None = None
    """The decoder's typed ``extra`` options as validated; open: each decoder declares its own."""
    algorithm_additions: JsonDict | None = None
    """What the algorithm added to its rollouts (its declared RolloutAdditions model, named under ``model``)."""


class TrainingLink(GivenFieldsRecord):
    """The training run a trained checkpoint came from (``model.training``), as trainers/evaluate.py writes
    it. Every field is optional: records written by other tools name fewer."""

    run: str | None = None
    """Name of the training run directory (dare-train's run name)."""
    run_id: str | None = None
    """The training run's id as other tools name it; read when ``run`` is absent."""
    run_dir: str | None = None
    """Path of the training run directory when the checkpoint was evaluated."""
    algorithm: str | None = None
    """Registry name of the training algorithm (d1, mdpo, sft, ...)."""
    algorithm_config: JsonDict | None = None
    """The algorithm's resolved options; open: each algorithm, plugins included, declares its own Config."""
    base_model: str | None = None
    """Name of the model training started from (the leaderboard links the row to its base model's)."""
    base_model_path: str | None = None
    """Path of the starting checkpoint."""
    step: int | None = None
    """Optimiser step of the evaluated checkpoint."""
    checkpoint: str | None = None
    """Path of the evaluated checkpoint."""
    config: JsonDict | None = None
    """The whole training config (dare.trainers' TrainConfig, dumped); open here, since its schema belongs
    to the trainers, which the harness does not import."""
    curve: list[CurvePoint] | None = None
    """The training curve inline, one row per logged step."""
    metrics_path: str | None = None
    """The training curve as a JSONL file of such rows, relative to the run directory (instead of ``curve``)."""
    estimator: EstimatorLink | None = None
    """The likelihood estimator the run used (absent in records written before it was recorded)."""
    rollout: RolloutLink | None = None
    """The rollouts' decoding, decoder, options and algorithm additions (absent: no rollouts, or older records)."""

    def run_name(self) -> str | None:
        """The training run: ``run`` as dare-train writes it, else ``run_id``."""
        return self.run or self.run_id

    def __bool__(self) -> bool:
        """An empty link (``"training": {}``) reads as no link, as the empty dict it was read as before."""
        return bool(self.model_fields_set)


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


class BenchmarkTiming(GivenFieldsRecord):
    """Wall-clock seconds one benchmark of a run took."""

    generate_s: float | None = None
    """Seconds spent generating (or reading from the cache) its completions; absent if interrupted first."""
    verify_s: float | None = None
    """Seconds spent verifying its completions."""


TIMING_PHASES = ("generate_s", "verify_s")


class Timing(Record):
    """Wall-clock seconds of a run. Serialised flat, as run.json has always held it: ``<benchmark>.generate_s``
    for every benchmark, then ``<benchmark>.verify_s``, then ``total_s``; read from that form (or this one)."""

    benchmarks: dict[str, BenchmarkTiming] = Field(default_factory=dict)
    """Per benchmark, its generation and verification seconds."""
    total_s: float | None = None
    """Seconds from the first generation to the end of scoring."""

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        if not isinstance(data, dict) or isinstance(data.get("benchmarks"), dict):
            return data
        benchmarks: dict[str, dict[str, Any]] = {}
        out: dict[str, Any] = {"benchmarks": benchmarks}
        for key, value in data.items():
            name, _, phase = str(key).rpartition(".")
            if key == "total_s":
                out["total_s"] = value
            elif name and phase in TIMING_PHASES:
                benchmarks.setdefault(name, {})[phase] = value
            else:
                raise ValueError(f"unknown timing key {key!r}; expected total_s, <benchmark>.generate_s or "
                                 "<benchmark>.verify_s")
        return out

    @model_serializer(mode="plain")
    def _to_flat(self) -> dict[str, float]:
        flat = {f"{name}.{phase}": getattr(t, phase) for phase in TIMING_PHASES for name, t in self.benchmarks.items()
                if getattr(t, phase) is not None}
        return flat | ({"total_s": self.total_s} if self.total_s is not None else {})

    def benchmark(self, name: str) -> BenchmarkTiming:
        """The benchmark's timing (empty when it has none)."""
        return self.benchmarks.get(name) or BenchmarkTiming()


class Environment(GivenFieldsRecord):
    """The software and machine a run ran on (harness/rundir.py ``environment()``): what float results
    depend on beyond the versions. A fact that could not be found is ``null``; one not applicable is absent."""

    python: str | None = None
    """Python version (3.11.7)."""
    platform: str | None = None
    """``platform.platform()``: OS, kernel and libc."""
    cpu_count: int | None = None
    """Logical CPUs of the machine."""
    cpu: str | None = None
    """CPU model name (float kernels are chosen per CPU)."""
    dare_version: str | None = None
    """Installed version of dare-dllm."""
    torch: str | None = None
    """Installed torch version (null: not installed)."""
    transformers: str | None = None
    """Installed transformers version."""
    math_verify: str | None = None
    """Installed math-verify version (math grading depends on it)."""
    torch_threads: int | None = None
    """torch's intra-op thread count (recorded when an engine imported torch)."""
    deterministic_algorithms: bool | None = None
    """Whether torch's deterministic algorithms were switched on."""
    cpu_capability: str | None = None
    """The vector kernels torch dispatched to (AVX2, AVX512, ...)."""
    mkl_cbwr: str | None = None
    """MKL's reproducibility mode (``MKL_CBWR``), when set."""
    cuda: str | None = None
    """CUDA version torch was built with, when a GPU was available."""
    gpu: str | None = None
    """Name of the first GPU, when one was available."""
    git_commit: str | None = None
    """Commit of the dare source tree, when it is a git checkout."""
    git_dirty: bool | None = None
    """Whether tracked files differed from that commit."""


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
