"""A run's own facts, typed: the training run a checkpoint came from (``model.training``), the time each
phase took (``timing``), the machine it ran on (``environment``) and its worker processes (``execution``). Each
serialises to the JSON schema 2 has always held; :mod:`.records` re-exports them with the other records."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_serializer, model_validator

from .record_base import GivenFieldsRecord, JsonDict, Record


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
    kl_ref: float | None = None
    """Mean KL of the policy to the reference model on the step's rollouts (algorithms with a reference)."""
    clip_fraction: float | None = None
    """Share of the step's tokens (or sequences) whose ratio the clip held (clipped algorithms)."""


class EstimatorLink(Record):
    """The likelihood estimator a training run used (``model.training.estimator``)."""

    name: str
    """Registry name of the estimator (what the algorithm's ``auto`` resolved to, or the one configured)."""
    options: JsonDict = Field(default_factory=dict)
    """Its options; open: each estimator, plugins included, declares its own."""


class RolloutLink(GivenFieldsRecord):
    """What a training run's rollouts decoded with (``model.training.rollout``, also ``RUN/rollout.json``); only
    the fields the trainer gave are written (``rollout_mode`` only by algorithms with a rollout of their own)."""

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
    rollout_mode: JsonDict | None = None
    """A rollout of the algorithm's own (d-TreeRPO's trees: shape, branch steps, forwards per prompt)."""


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


class Execution(Record):
    """How a run was spread over processes (``dare-eval --workers N``; absent for a run in one process). Nothing
    here can change a sample, so none of it is in the config hash or a cache key."""

    workers: int
    """Engine replicas, each a Ray actor."""
    worker_restart_budget: int
    """Dead replicas the run could replace (``--worker-restarts``)."""
    worker_restarts: int = 0
    """Dead replicas it replaced; their unfinished shards were generated again (same seeds, same samples)."""


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
    """Commit of the dare source tree, when it is a git checkout, as the process's first record found it."""
    git_dirty: bool | None = None
    """Whether tracked files differed from that commit, then or by this record (a commit made meanwhile too)."""
