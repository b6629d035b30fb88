"""Training configuration: one :class:`TrainConfig`, from an experiment YAML (configs/experiments/), an
algorithm preset (configs/algorithms/) and command-line flags, validated with every problem reported.

Algorithm presets are data: ``{name, algorithm, settings}``; ``--algo`` accepts a preset name or a
registered algorithm name (its paper defaults).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dare.harness.config import catalog, load_yaml_model, validation_problems
from dare.harness.errors import ConfigError, RegistryError
from dare.harness.parallel import DEFAULT_WORKER_RESTARTS
from dare.harness.registry import algorithms, did_you_mean
from dare.harness.stopping import DEFAULT_GRACE_S


class AlgorithmPreset(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    algorithm: str = Field(description="registered algorithm name")
    description: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)


# Rollout settings of an algorithm that states none (JustGRPO's and MDPO's official temperatures replace it).
ROLLOUT_DEFAULTS: dict[str, Any] = {"temperature": 0.6}


class TrainConfig(BaseModel):
    """Every setting of a local training run (saved in the run directory; resuming requires the same)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    algorithm: str = Field(description="registered algorithm or preset from configs/algorithms")
    algorithm_settings: dict[str, Any] = Field(default_factory=dict, description="overrides of the algorithm config")
    suite: str
    model: str | None = Field(None, description="model name from configs/models")
    model_path: str | None = None
    model_label: str | None = Field(None, description="the base model's name in records (default: the model "
                                    "name, else the checkpoint folder's)")
    engine: str = "torch"
    steps: int = Field(10, ge=1)
    prompts_per_step: int = Field(2, ge=1, description="prompts per rollout batch")
    group_size: int = Field(4, ge=1, description="completions per prompt (GRPO group); SFT ignores it")
    micro_batch_size: int = Field(8, ge=1, description="rows per forward/backward (gradient accumulation)")
    lr: float = Field(1e-5, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = Field(0, ge=0)
    lr_schedule: Literal["constant", "cosine"] = Field("constant", description="after warm-up (verl RL: constant; "
                                                        "LLaDA SFT: cosine to 0 at the last step)")
    grad_clip: float | None = Field(1.0, gt=0)
    seed: int = 0
    dtype: Literal["float32", "bfloat16"] = "float32"
    rollout_dtype: Literal["float32", "bfloat16"] | None = Field(
        None, description="run rollouts on a separate copy in this dtype (weights synced each step)")
    device: str | None = None
    threads: int | None = Field(None, ge=1, description="torch CPU threads for the run (None: the process's, e.g. "
                                "OMP_NUM_THREADS); recorded in RUN/environment.json")
    deterministic: bool = Field(False, description="torch.use_deterministic_algorithms for the run (fails on a "
                                "kernel without a deterministic version); recorded")
    grace_s: float = Field(DEFAULT_GRACE_S, gt=0, allow_inf_nan=False,
                           description="after SIGTERM or Ctrl-C: seconds to finish the step in flight, checkpoint "
                           "it and exit 75 (a second signal, or the end of the grace, exits at once); execution only")
    worker_restarts: int = Field(DEFAULT_WORKER_RESTARTS, ge=0, strict=True,
                                 description="with --engine verl: dead training workers replaced (the whole group, "
                                 "from the last checkpoint) before the run stops; execution only")
    decoding: dict[str, Any] = Field(default_factory=dict, description="DecodingConfig overrides (rollout and eval)")
    rollout_decoding: dict[str, Any] = Field(default_factory=dict, description="overrides for rollouts only "
                                             "(sampling temperature); they win over the algorithm's own rollout "
                                             "settings, which win over ROLLOUT_DEFAULTS")
    reward: Literal["task", "score"] = Field(
        "task", description="RL reward: the task's published rule (d1/DARE: Sudoku partial credit, Countdown 0.1 "
        "for a wrong answer) or the evaluation's score")
    save_every: int = Field(1, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
    evaluate: bool = Field(True, description="evaluate the final checkpoint with dare.harness.runner")
    eval_limit: int | None = Field(None, ge=1)
    lora_rank: int = Field(0, ge=0, description="PEFT: LoRA rank on the linear layers (0: full fine-tuning)")
    lora_alpha: float = Field(16.0, gt=0)
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    lora_targets: tuple[str, ...] = Field(("q", "k", "v", "o", "qkv", "gate", "up", "down"),
                                          description="names of the nn.Linear attributes that get adapters")
    lora_backend: Literal["builtin", "peft"] = Field(
        "builtin", description='which LoRA implementation; "peft" uses Hugging Face peft, from the `peft` extra')
    packed: bool = Field(False, description="pack variable-length rows side by side (no compute on padding)")
    attention: Literal["auto", "sdpa", "flex"] = Field(
        "auto", description="attention kernel of training forwards; auto: FlexAttention block masks for block "
        "diffusion on CUDA, SDPA otherwise")
    chunk_size: int = Field(1024, ge=1, description="rows per chunk of the logits-free cross-entropy")

    def fingerprint(self) -> str:
        """Hash of the settings that define the run's trajectory (not steps, evaluation or execution: device,
        threads and kernels are recorded per (re)start in RUN/environment.json instead). Fields at
        their defaults are left out, so a field added later (default: the old behaviour) keeps old runs
        resumable."""
        return hashlib.sha256(json.dumps(self.fingerprint_data(), sort_keys=True).encode()).hexdigest()[:16]

    def fingerprint_data(self) -> dict[str, Any]:
        """The settings the fingerprint hashes (those off their defaults), for naming what differs."""
        return self.model_dump(mode="json", exclude_defaults=True,
                               exclude={"steps", "evaluate", "eval_limit", "device", "save_every", "keep_checkpoints",
                                        "model_label", "threads", "deterministic", "grace_s",
                                        "worker_restarts"})


def preset_names() -> list[str]:
    return sorted(catalog("algorithms"))


def resolve_algorithm(name: str, overrides: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(registered algorithm, settings) for a preset or algorithm name; unknown names list both kinds."""
    presets = catalog("algorithms")
    if name in presets:
        preset = load_yaml_model(presets[name], AlgorithmPreset)
        return preset.algorithm, {**preset.settings, **overrides}
    if name in algorithms:
        return name, dict(overrides)
    known = sorted(set(algorithms.names()) | set(presets))
    raise RegistryError(f"unknown algorithm {name!r}{did_you_mean(name, known)} (available: {', '.join(known)})")


def dare_preset(name: str) -> str:
    """The preset reproducing DARE's version of algorithm ``name`` (``{name}_dare``), for --dare-compat."""
    presets = catalog("algorithms")
    if name.endswith("_dare") and name in presets:
        return name
    base = load_yaml_model(presets[name], AlgorithmPreset).algorithm if name in presets else name
    base = algorithms.get(base).name if base in algorithms else base  # aliases: diffu_grpo -> d1
    if f"{base}_dare" in presets:
        return f"{base}_dare"
    having = sorted(p.removesuffix("_dare") for p in presets if p.endswith("_dare"))
    raise ConfigError(f"--dare-compat: algorithm {name!r} has no DARE preset ({base}_dare); DARE's versions exist "
                      f"for: {', '.join(having)}; drop --dare-compat to run the paper's version")


def load_experiment(path: str | None, flags: dict[str, Any]) -> TrainConfig:
    """Experiment YAML (a path or a name under configs/experiments) overlaid with command-line flags."""
    data: dict[str, Any] = {}
    source = "command line"
    if path:
        file = Path(path)
        if not file.is_file():
            file = catalog("experiments").get(path, file)
        if not file.is_file():
            names = ", ".join(sorted(catalog("experiments"))) or "none"
            raise ConfigError(f"no experiment config {path!r} (shipped: {names})")
        loaded = yaml.safe_load(file.read_text())
        if not isinstance(loaded, dict):
            raise ConfigError("expected a mapping at the top level", source=str(file))
        if loaded.get("kind") == "comparison":
            raise ConfigError(f"{file.stem} is a comparison of several runs; run it with dare-train --compare "
                              f"{file.stem} --out DIR", source=str(file))
        data, source = loaded, str(file)
    for key, value in flags.items():
        if isinstance(value, dict):
            data[key] = {**data.get(key, {}), **value}
        elif value is not None:
            data[key] = value
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc), source=source) from exc
