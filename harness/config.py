"""YAML configuration: benchmarks, suites and models under ``configs/``, validated on load.

Every file maps one-to-one onto a pydantic model; a file with several problems reports all of them in
one :class:`ConfigError`. Extra directories of configs can be added with ``$DARE_CONFIG_PATH``
(colon-separated), searched before the shipped ones.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ConfigError, RegistryError
from .records import DecodingConfig
from .registry import did_you_mean

SHIPPED_CONFIGS = Path(__file__).resolve().parent.parent / "configs"
M = TypeVar("M", bound=BaseModel)


class Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ChoiceSpec(Spec):
    """How a likelihood-scored multiple-choice benchmark builds its requests, as lm-eval builds them
    (lm_eval 0.4.8 ``api/task.py: ConfigurableTask.fewshot_context``, ``api/samplers.py: ContextSampler``):
    the description, then ``num_fewshot`` solved examples from ``fewshot`` (each: text, ``target_delimiter``,
    answer, ``fewshot_delimiter``), then the question; each choice is ``target_delimiter`` + choice."""

    fewshot: str | None = Field(None, description="data file of the split few-shot examples come from")
    num_fewshot: int = Field(0, ge=0, description="examples per context (a suite preset or --set choice.num_fewshot "
                             "may change it)")
    sampler: Literal["random", "first_n"] = Field("random", description="lm-eval's few-shot sampler: random.Random"
                                                   "(1234).sample per question in order, or the first n")
    draw_one_more: bool = Field(False, description="lm-eval's quirk: its sampler draws num_fewshot + 1 and keeps "
                                "the first num_fewshot that are not the question whenever the task's fewshot_split "
                                "equals its test_split, both unset included (winogrande, piqa, hellaswag); "
                                "always so when the few-shot file is the data file")
    group: str | None = Field(None, description="a row field the few-shot examples share with the question "
                              "(MMLU's subject: one lm-eval task, one sampler, per value)")
    description: str = Field("", description="text before the examples; {field} takes the row's field")
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"


class BenchmarkSpec(Spec):
    """A benchmark: a shipped data file, a prompt template, a verifier and its metrics (data only).

    ``task: choice`` benchmarks are scored by likelihood instead (no prompt template, no verifier): each row
    holds a question and its choices, ``choice`` says how contexts are built, ``metrics`` are acc, acc_norm
    or mc2 (harness/choice.py)."""

    name: str
    version: str = Field(description="this config's own version (prompt, verifier or metric choices changed)")
    # Required, no default: a score is only comparable with a paper's on the same dataset release, so every
    # benchmark (a user's too) says which one its data file is; run.json and the leaderboard columns carry it.
    dataset_version: str = Field(min_length=1, description="the source's own name for the data release the "
                                 "data file holds: a release tag (EvalPlus v0.2.0) or source and year/commit")
    family: str = Field(description="math, code, planning or knowledge")
    data: str = Field(description="test split file under harness/data")
    train: str | None = Field(None, description="train split file, for trainers")
    task: Literal["generate", "choice"] = Field("generate", description="generate and verify, or score choices "
                                                 "by likelihood")
    prompt: str | None = Field(None, description="prompt template name (registry 'prompt template'); generate only")
    verifier: str | None = Field(None, description="generate only")
    verifier_args: dict[str, Any] = Field(default_factory=dict)
    choice: ChoiceSpec | None = Field(None, description="choice only: how contexts are built")
    metrics: list[str] = Field(default_factory=lambda: ["accuracy"])

    @model_validator(mode="after")
    def _fields_of_its_task(self) -> BenchmarkSpec:
        if self.task == "generate" and (self.prompt is None or self.verifier is None):
            raise ValueError("a generate benchmark names its prompt and verifier")
        if self.task == "choice" and (self.prompt or self.verifier or self.choice is None):
            raise ValueError("a choice benchmark has a choice section and no prompt or verifier")
        return self


class ChoiceSettings(Spec):
    """A preset for a choice benchmark: few-shot count, chat template, the likelihood estimator (name, options)."""

    num_fewshot: int | None = Field(None, ge=0)
    chat_template: bool | None = Field(None, description="each context as the user turn of the model's chat template "
                                       "(lm-eval's --apply_chat_template); None: the layer below decides (raw text)")
    estimator: str | None = Field(None, description="a registered scoring estimator (None: the family's default)")
    options: dict[str, Any] = Field(default_factory=dict, description="the estimator's options")


class SuiteSpec(Spec):
    name: str
    benchmarks: list[str]
    choice: dict[str, ChoiceSettings] = Field(default_factory=dict, description="'default' and per-benchmark "
                                              "presets for its choice benchmarks (a paper's recipe per task)")


class ModelSpec(Spec):
    """A supported checkpoint: where it comes from, how to load it and its authors' decoding settings."""

    name: str
    aliases: list[str] = Field(default_factory=list, description="short names that resolve to this config (sdar-8b)")
    architecture: str
    hub_id: str | None = None
    family: str | None = None
    description: str = ""
    path: str | None = Field(None, description="checkpoint shipped with the package, relative to configs/models")
    chat_template: str = Field("tokenizer", description="'tokenizer' (from tokenizer_config.json), 'none', or a file")
    mask_id: int | None = None
    eos_id: int | None = None
    # A model's own end markers beside EOS and its architecture's end-of-turn: DiffuCoder-Instruct pads every
    # answer to the canvas with <|dlm_pad|>, and its authors cut the text at the first one. By token text, so
    # the id comes from the checkpoint's own tokenizer.
    stop_tokens: list[str] = Field(default_factory=list, description="tokens (by text) that end an answer besides "
                                   "EOS and the architecture's end-of-turn; each must be one token of the tokenizer")
    decoding: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                                description="'default' and per-suite/benchmark overrides")
    likelihood: dict[str, ChoiceSettings] = Field(default_factory=dict, description="'default' and per-suite/"
                                                  "benchmark estimator presets for choice benchmarks")

    def decoding_for(self, suite: str, benchmark: str | None = None) -> dict[str, Any]:
        """The model authors' decoding fields for a suite: default, then suite, then benchmark overrides."""
        out: dict[str, Any] = dict(self.decoding.get("default", {}))
        out.update(self.decoding.get(suite, {}))
        if benchmark:
            out.update(self.decoding.get(benchmark, {}))
        return out


def config_dirs() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("DARE_CONFIG_PATH", "").split(os.pathsep) if p]
    return [*extra, SHIPPED_CONFIGS]


def validation_problems(exc: ValidationError) -> list[str]:
    """One readable line per pydantic error: ``field.path: message (got value)``."""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        shown = (f" (got {got!r})" if err["type"] not in ("missing", "extra_forbidden") and not isinstance(got, dict)
                 else "")
        problems.append(f"{loc}: {msg}{shown}")
    return problems


def load_yaml_model(path: Path, model: type[M]) -> M:
    """Parse a YAML file into ``model``, reporting every problem at once."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}".replace("\n", " "), source=str(path)) from exc
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", source=str(path))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc), source=str(path)) from exc


@functools.cache
def catalog(kind: str) -> dict[str, Path]:
    """Config name -> file for a kind (a folder of configs/: benchmarks, suites, models, prompts, ...)."""
    found: dict[str, Path] = {}
    for root in config_dirs():
        for path in sorted((root / kind).glob("*.yaml")) if (root / kind).is_dir() else []:
            found.setdefault(path.stem, path)
    return found


def names(kind: str) -> list[str]:
    """Names of the configs of a kind: 'benchmarks', 'suites' or 'models'."""
    return sorted(catalog(kind))


def _load(kind: str, name: str, model: type[M], what: str) -> M:
    path = catalog(kind).get(name)
    if path is None:
        raise RegistryError(f"unknown {what} {name!r}{did_you_mean(name, names(kind))} "
                            f"(available: {', '.join(names(kind))})")
    spec = load_yaml_model(path, model)
    if getattr(spec, "name", name) != name:
        raise ConfigError(f"name {spec.name!r} does not match the file name {name!r}", source=str(path))
    return spec


@functools.cache
def benchmark(name: str) -> BenchmarkSpec:
    return _load("benchmarks", name, BenchmarkSpec, "benchmark")


def model_aliases() -> dict[str, str]:
    """Short name -> model config name, from each model file's ``aliases`` (read only for unknown names)."""
    out: dict[str, str] = {}
    for name, path in catalog("models").items():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue  # that file's own problem is reported when it is loaded by name
        for alias in data.get("aliases") or [] if isinstance(data, dict) else []:
            out.setdefault(str(alias), name)
    return out


def model_name(name: str) -> str:
    """The config name of a model given by its name or one of its aliases (unknown names unchanged)."""
    return name if name in catalog("models") else model_aliases().get(name, name)


@functools.cache
def model(name: str) -> ModelSpec:
    canonical = model_name(name)
    if canonical not in catalog("models"):  # suggestions include the aliases people type
        known = sorted(set(names("models")) | set(model_aliases()))
        raise RegistryError(f"unknown model {name!r}{did_you_mean(name, known)} "
                            f"(available: {', '.join(names('models'))})")
    return _load("models", canonical, ModelSpec, "model")


def model_config_path(name: str) -> Path:
    return catalog("models")[model(name).name]


@functools.cache
def suite(name: str) -> SuiteSpec:
    """A suite from configs/suites, or the implicit one-benchmark suite named after a benchmark."""
    if name in catalog("suites"):
        spec = _load("suites", name, SuiteSpec, "suite")
        for b in spec.benchmarks:
            benchmark(b)
        return spec
    if name in catalog("benchmarks"):
        return SuiteSpec(name=name, benchmarks=[name])
    raise RegistryError(f"unknown suite {name!r}{did_you_mean(name, suite_names())} "
                        f"(available: {', '.join(suite_names())})")


def suite_names() -> list[str]:
    return sorted(set(names("suites")) | set(names("benchmarks")))


def decoding_with_overrides(base: dict[str, Any], overrides: dict[str, Any],
                            source: str = "decoding") -> DecodingConfig:
    """Build a DecodingConfig from layered settings, reporting every invalid field at once."""
    try:
        return DecodingConfig.model_validate({**base, **overrides})
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc), source=source) from exc
