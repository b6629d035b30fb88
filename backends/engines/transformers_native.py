"""The ``transformers`` engine: diffusion LMs that transformers ships natively, run by transformers itself.

Today that is DiffusionGemma (``model_type: diffusion_gemma``): the checkpoint is loaded with
``DiffusionGemmaForBlockDiffusion.from_pretrained`` (local files only, no remote code) and decoded by its
own block-diffusion ``generate``: an encoder caches the prompt, then each canvas of ``canvas_length``
tokens starts as uniform noise and is refined for up to ``max_denoising_steps`` steps by an entropy-bound
sampler under a linear temperature schedule, stopping early once the canvas is stable and confident.

:func:`generation_options` maps a :class:`DecodingConfig` onto those options; every field it cannot
express is refused (ConfigError), never dropped. Engine options (``--set engine.NAME=VALUE``, typed:
:class:`TransformersOptions`): ``dtype`` (float32 / bfloat16 / float16; default: the checkpoint's) and
``threads`` (CPU threads, execution only); dtype and the device class key the generation cache.

transformers draws the noise from the global torch RNG over the whole batch, so a request's output would
depend on its batch-mates: requests are generated one at a time, each under its own seed
(``decoding.batch_size`` is accepted but does not batch).
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import torch
import transformers

from dare.backends.models.loader import checkpoint_dir, fingerprint
from dare.backends.models.tokenizer import render_prompt, use_chat_template
from dare.harness.engine import EngineBase, EngineContext, GenerationRequest
from dare.harness.errors import ConfigError, ModelError
from dare.harness.options import Capabilities, Options
from dare.harness.records import DecodingConfig, Generation, Message, ModelInfo, sha256_text

log = logging.getLogger(__name__)

ENGINE_NAME = "transformers"
SUPPORTED_MODEL_TYPES = ("diffusion_gemma",)
REMASKING = "entropy_bound"  # DiffusionGemma's only sampler: accept lowest-entropy tokens, renoise the rest
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# algorithm options read from DecodingConfig.extra (flat or under extra["transformers"]) -> their type
ALGORITHM_OPTIONS: dict[str, type] = {"t_min": float, "t_max": float, "entropy_bound": float,
                                      "stability_threshold": int, "confidence_threshold": float}

# DecodingConfig fields DiffusionGemma's generate has no counterpart for: required value and why
_FIXED_FIELDS: dict[str, tuple[Any, str]] = {
    "temperature": (0.0, "its temperature is a linear schedule set with extra.transformers.t_min/t_max"),
    "threshold": (None, "it commits by an entropy bound (extra.transformers.entropy_bound), "
                  "not a confidence threshold"),
    "factor": (None, "it has no factor-based parallel commit"),
    "top_p": (None, "its generate has no nucleus filtering"),
    "top_k": (None, "its generate has no top-k filtering"),
    "cfg_scale": (0.0, "its generate has no classifier-free guidance"),
    "alg_temp": (None, "Dream's position temperature does not apply"),
    "stop_at_eos": (True, "its generate always ends a sequence at EOS"),
    "cache": ("none", "the prompt KV cache is part of the architecture (exact); approximate caches do not apply"),
}


def generation_options(decoding: DecodingConfig, canvas_length: int) -> dict[str, Any]:
    """Keyword options for ``DiffusionGemmaForBlockDiffusion.generate`` equivalent to ``decoding``.

    ``steps`` is DARE's total over ``gen_length``; DiffusionGemma's ``max_denoising_steps`` is per canvas
    (an upper bound: its stopping rule may end a canvas earlier). Raises ConfigError naming every field
    that cannot be expressed. Pure: reads nothing but its arguments.
    """
    problems = [f"{name}={getattr(decoding, name)!r}: not supported by the transformers engine, {why}; "
                f"use {name}={required!r}"
                for name, (required, why) in _FIXED_FIELDS.items() if getattr(decoding, name) != required]
    if decoding.remasking != REMASKING:
        problems.append(f"remasking={decoding.remasking!r}: DiffusionGemma's only sampler is {REMASKING!r}; "
                        f"use remasking={REMASKING}")
    options: dict[str, Any] = {"max_new_tokens": decoding.gen_length}
    if decoding.block_length != canvas_length:
        problems.append(f"block_length={decoding.block_length}: the checkpoint's canvas_length is {canvas_length}; "
                        f"use block_length={canvas_length} (and gen_length a multiple of it)")
    else:
        n_canvases = decoding.gen_length // canvas_length
        if decoding.steps % n_canvases:
            problems.append(f"steps={decoding.steps} is not divisible by the {n_canvases} canvases "
                            "(gen_length / block_length); pick a multiple of it")
        options["max_denoising_steps"] = decoding.steps // n_canvases
    algorithm, extra_problems = _algorithm_options(decoding.extra)
    problems += extra_problems
    if problems:
        raise ConfigError(problems, source="transformers engine")
    if "entropy_bound" in algorithm:
        from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

        algorithm["sampler_config"] = EntropyBoundSamplerConfig(entropy_bound=algorithm.pop("entropy_bound"))
    return {**options, **algorithm}


def _algorithm_options(extra: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The DiffusionGemma options in ``extra`` (flat keys or ``extra["transformers"]``), typed and checked."""
    problems: list[str] = []
    raw = {k: v for k, v in extra.items() if k != ENGINE_NAME}
    nested = extra.get(ENGINE_NAME) or {}
    if not isinstance(nested, dict):
        return {}, [f"extra.{ENGINE_NAME} must be a mapping of options, got {nested!r}"]
    raw.update(nested)
    options: dict[str, Any] = {}
    for key, value in raw.items():
        kind = ALGORITHM_OPTIONS.get(key)
        if kind is None:
            problems.append(f"extra.{key}: not an option of the transformers engine "
                            f"(options: {', '.join(ALGORITHM_OPTIONS)})")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
            problems.append(f"extra.{key}={value!r}: expected a {kind.__name__}")
        else:
            options[key] = kind(value)
    if ("t_min" in options) != ("t_max" in options):
        problems.append("extra.t_min and extra.t_max set the temperature schedule together; set both")
    elif "t_min" in options and not 0 <= options["t_min"] < options["t_max"]:
        problems.append(f"extra.t_min={options['t_min']} / t_max={options['t_max']}: need 0 <= t_min < t_max")
    for key in ("entropy_bound", "confidence_threshold"):
        if key in options and options[key] <= 0:
            problems.append(f"extra.{key}={options[key]}: must be > 0")
    if options.get("stability_threshold", 0) < 0:
        problems.append(f"extra.stability_threshold={options['stability_threshold']}: must be >= 0")
    return options, problems


@contextmanager
def _quiet_progress():
    """transformers draws loading/saving progress bars on stderr; library code here prints nothing."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class _StepCounter:
    """A streamer that counts denoising steps: transformers calls ``put_draft`` once per decoder pass."""

    _takes_logits = False

    def __init__(self) -> None:
        self.steps = 0

    def put(self, value: torch.Tensor) -> None:
        pass

    def put_draft(self, value: torch.Tensor) -> None:
        self.steps += 1

    def end(self) -> None:
        pass


class TransformersOptions(Options):
    """``--set engine.X``: ``dtype`` (None: the checkpoint's) and ``threads`` (CPU threads; execution only)."""

    execution_only = frozenset({"threads"})
    dtype: Literal["float32", "bfloat16", "float16"] | None = None
    threads: int | None = None


class TransformersEngine(EngineBase):
    """Engine protocol implementation over transformers' native diffusion LMs (DiffusionGemma)."""

    name = ENGINE_NAME
    version = f"0.1.0+transformers.{transformers.__version__}"
    Options = TransformersOptions
    capabilities = Capabilities(decoding_defaults=True)

    def __init__(self, ctx: EngineContext):
        super().__init__(ctx)
        threads = self.options.threads  # validated first: a bad option stops before the checkpoint is read
        self.path = checkpoint_dir(ctx)
        self._templated: bool | None = None
        self.config = self._read_config()
        self.device = ctx.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if threads:
            torch.set_num_threads(int(threads))
        self._model = None
        self._tokenizer = None

    def _read_config(self):
        from transformers import AutoConfig

        if not (self.path / "config.json").is_file():
            raise ModelError(f"{self.path} has no config.json; "
                             "--model-path must be a Hugging Face checkpoint directory")
        # the declared type first: transformers' own error for a type it does not know (sdar, llada) is several
        # lines advising an upgrade, while the fix is another backend
        try:
            declared = json.loads((self.path / "config.json").read_text()).get("model_type")
        except (OSError, ValueError, AttributeError) as exc:
            raise ModelError(f"{self.path / 'config.json'} is not a JSON object ({exc}); "
                             "--model-path must be a Hugging Face checkpoint directory") from exc
        if declared not in SUPPORTED_MODEL_TYPES:
            raise ModelError(f"{self.path} is a {declared!r} checkpoint; the transformers backend runs "
                             f"{', '.join(SUPPORTED_MODEL_TYPES)} (use --backend torch for the other dLLMs)")
        try:
            config = AutoConfig.from_pretrained(str(self.path), local_files_only=True, trust_remote_code=False)
        except (OSError, ValueError, KeyError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"transformers cannot read {self.path / 'config.json'}: {first}") from exc
        if not isinstance(config.canvas_length, int) or config.canvas_length < 1:
            raise ModelError(f"{self.path / 'config.json'} has canvas_length={config.canvas_length!r}; "
                             "DiffusionGemma needs a positive canvas (block) length")
        return config

    @property
    def canvas_length(self) -> int:
        return int(self.config.canvas_length)

    @property
    def model(self):
        if self._model is None:
            from transformers import DiffusionGemmaForBlockDiffusion

            dtype = _DTYPES[self.options.dtype] if self.options.dtype else "auto"
            try:
                with _quiet_progress():
                    model = DiffusionGemmaForBlockDiffusion.from_pretrained(
                        str(self.path), local_files_only=True, trust_remote_code=False, dtype=dtype)
            except (OSError, ValueError) as exc:
                raise ModelError(f"transformers cannot load the checkpoint in {self.path}: {exc}") from exc
            self._model = model.to(self.device).eval()
            log.info("loaded %s on %s (%s)", self.path, self.device, self._model.dtype)
        return self._model

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                self._tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True,
                                                                trust_remote_code=False)
            except (OSError, ValueError) as exc:
                raise ModelError(f"transformers cannot load the tokenizer in {self.path}: {exc}") from exc
        return self._tokenizer

    def model_info(self) -> ModelInfo:
        digest, parts = fingerprint(self.path)
        # the checkpoint's generation_config.json sets the sampler defaults, so it is part of the identity
        gen_file = self.path / "generation_config.json"
        if gen_file.is_file():
            parts["generation_config.json"] = sha256_text(gen_file.read_text())[:16]
            digest = sha256_text(digest + parts["generation_config.json"])[:16]
        return ModelInfo(name=self.ctx.model_name, path=str(self.path), architecture=self.config.model_type,
                         fingerprint=digest, fingerprint_parts=parts)

    def token_identity(self) -> dict:
        """dtype (None: the checkpoint's, which its fingerprint covers) and the device class; not the threads."""
        return {**self.options.identity(), "device": str(self.device).split(":")[0]}

    def decoding_defaults(self) -> dict:
        """Without a ModelSpec: the checkpoint's canvas as the block and DiffusionGemma's sampler."""
        return {} if self.ctx.model_spec else {"block_length": self.canvas_length, "remasking": REMASKING}

    def prepare(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> None:
        """Check the decoding mapping, the tokenizer and the chat template before any generation."""
        generation_options(decoding, self.canvas_length)
        if requests:
            self.prompt_ids(requests[0].messages)

    def _use_template(self) -> bool:
        if self._templated is None:
            self._templated = use_chat_template(self.tokenizer, self.ctx.model_spec)
        return self._templated

    def prompt_ids(self, messages: tuple[Message, ...] | list[Message]) -> list[int]:
        """Prompt token ids: the tokenizer's chat template applied; a trailing assistant message is continued."""
        rendered = [{"role": m.role, "content": m.content} for m in messages]
        text = render_prompt(self.tokenizer, rendered, self._use_template())
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ModelError("a prompt tokenises to nothing; check the model's chat template and tokenizer")
        return ids

    def _special_ids(self) -> tuple[list[int], int | None]:
        """(stop ids, pad id): the checkpoint's generation config first, then its text config."""
        gen, text = self.model.generation_config, self.config.get_text_config()
        eos = gen.eos_token_id if gen.eos_token_id is not None else text.eos_token_id
        stop = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        pad = gen.pad_token_id if gen.pad_token_id is not None else text.pad_token_id
        return stop, pad

    def generate(self, requests: list[GenerationRequest], decoding: DecodingConfig) -> list[Generation]:
        options = generation_options(decoding, self.canvas_length)
        stop_ids, pad_id = self._special_ids()
        return [self._generate_one(r, options, stop_ids, pad_id) for r in requests]

    def _generate_one(self, request: GenerationRequest, options: dict[str, Any], stop_ids: list[int],
                      pad_id: int | None) -> Generation:
        began = time.perf_counter()
        prompt = torch.tensor([self.prompt_ids(request.messages)], device=self.device)  # (1, prompt_len)
        counter = _StepCounter()
        devices = [torch.device(self.device).index or 0] if torch.device(self.device).type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # the request's own seed; the caller's RNG is untouched
            torch.manual_seed(request.seed)
            out = self.model.generate(prompt, streamer=counter, eos_token_id=stop_ids or None, pad_token_id=pad_id,
                                      **options)
        ids = out.sequences[0, prompt.shape[1]:].tolist()  # (<= gen_length,): shorter when EOS ended it early
        stop = next((i for i, t in enumerate(ids) if t in stop_ids), None)
        if stop is not None:
            ids = ids[:stop + 1]  # transformers pads after EOS; the pads were never generated
        text = self.tokenizer.decode(ids[:stop] if stop is not None else ids, skip_special_tokens=True)
        return Generation(sample_id=request.sample_id, index=request.index, text=text, token_ids=ids,
                          finish_reason="stop" if stop is not None else "length", nfe=counter.steps,
                          latency_s=time.perf_counter() - began)


# Gemma-style turns; the tokenizer is tiny.write_tokenizer's byte-level BPE (256 bytes, then these specials)
_TINY_SPECIALS = ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
                  "<end_of_image>", "<image_soft_token>"]
_TINY_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role'])"
    " + '\\n' + m['content'] + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}")


def write_tiny_checkpoint(directory: str | Path, seed: int = 0, canvas_length: int = 8) -> Path:
    """Write a tiny random DiffusionGemma checkpoint (2 layers, MoE, 1-layer vision tower, 264-token vocab)
    with ``save_pretrained``, plus a byte-level tokenizer with a Gemma-style chat template. Used by tests."""
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion

    from dare.backends.models.tiny import write_tokenizer

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    roles = {"pad_token": "<pad>", "eos_token": "<eos>", "bos_token": "<bos>"}
    ids = write_tokenizer(directory, _TINY_SPECIALS, roles, _TINY_TEMPLATE)
    text = {"vocab_size": 256 + len(_TINY_SPECIALS), "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "global_head_dim": 16, "sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"],
            "max_position_embeddings": 2048, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32,
            "pad_token_id": ids["<pad>"], "eos_token_id": ids["<eos>"], "bos_token_id": ids["<bos>"]}
    vision = {"model_type": "gemma4_vision", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 16}
    config = DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=canvas_length,
                                  boi_token_id=ids["<start_of_image>"], eoi_token_id=ids["<end_of_image>"],
                                  image_token_id=ids["<image_soft_token>"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DiffusionGemmaForBlockDiffusion(config)
    model.generation_config.eos_token_id = [ids["<eos>"], ids["<end_of_turn>"]]
    model.generation_config.pad_token_id = ids["<pad>"]
    with _quiet_progress():
        model.save_pretrained(str(directory))
    return directory
