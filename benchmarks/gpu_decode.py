"""Decoding speed of 8B-shaped dLLMs on one GPU: every registered masked-diffusion strategy (commit rules,
KV caches, DPad under the dual cache) against the uncached reference (LLaDA-8B, LLaDA-MoE-7B-A1B), every
registered Dream strategy against ``dream:low_confidence`` (Dream-7B), the exact block cache (SDAR-8B), and
lmdeploy / SGLang where importable and a checkpoint is given.

    python benchmarks/gpu_decode.py [--lengths 256 1024] [--block-length 32] [--prompt-length 128]
        [--sdar-path ~/models/SDAR-8B-Chat] [--shape 8b|small]

Weights are random bf16, created directly on the GPU from the real config.json shapes (nothing written
to disk), so only speed is meaningful. Fixed steps = gen_length (one token per step), greedy, ``--batch`` copies
of one prompt (default 1).
``--shape small`` shrinks the models (hidden 512, 4 layers) for a quick smoke run.
The last line is one JSON object: per model and length, tokens/s per strategy, ``speedup`` over the
reference and ``peak_mib`` (peak CUDA memory per strategy).
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

import torch

from dare.backends import models as _models  # noqa: F401  (registers the architectures)
from dare.backends.decoding.common import Canvas
from dare.backends.decoding.fastdllm import cached_decoder
from dare.backends.models.loader import LoadedModel
from dare.backends.models.transformer import DiffusionTransformer
from dare.harness.records import DecodingConfig
from dare.harness.registry import architectures, caches, decoders

LLADA_8B = {"d_model": 4096, "n_heads": 32, "n_kv_heads": 32, "n_layers": 32, "mlp_hidden_size": 12288,
            "vocab_size": 126464, "embedding_size": 126464, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
            "block_type": "llama", "mask_token_id": 126336, "eos_token_id": 126081}
SDAR_8B = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "num_hidden_layers": 36, "intermediate_size": 12288, "vocab_size": 151936, "rope_theta": 1000000,
           "rms_norm_eps": 1e-6, "mask_token_id": 151669, "eos_token_id": 151643}
DREAM_7B = {"hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
            "intermediate_size": 18944, "vocab_size": 152064, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
            "mask_token_id": 151666, "eos_token_id": 151643}
# LLaDA-MoE-7B-A1B (inclusionAI's model card and modeling_lladamoe.py: 16 layers, 64 experts, top-8, every layer MoE)
LLADA_MOE_7B = {"architectures": ["LLaDAMoEModelLM"], "model_type": "llada", "hidden_size": 2048,
                "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 16,
                "dense_intermediate_size": 8192, "expert_intermediate_size": 1024, "num_experts": 64,
                "num_experts_per_tok": 8, "moe_layer_freq": [1] * 16, "qk_layernorm": True, "rope_theta": 50000,
                "partial_rotary_factor": 1, "rms_norm_eps": 1e-5, "vocab_size": 157184, "mask_token_id": 156895,
                "eos_token_id": 156892}
SMALL = {"llada": {"d_model": 512, "n_layers": 4, "mlp_hidden_size": 1408, "n_heads": 8, "n_kv_heads": 8},
         "dream": {"hidden_size": 512, "num_hidden_layers": 4, "intermediate_size": 1408,
                   "num_attention_heads": 8, "num_key_value_heads": 2},
         "sdar": {"hidden_size": 512, "num_hidden_layers": 4, "intermediate_size": 1408, "head_dim": 64,
                  "num_attention_heads": 8, "num_key_value_heads": 2},
         "llada_moe": {"hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
                       "expert_intermediate_size": 256, "moe_layer_freq": [1] * 4}}


#: architecture -> the decoding family its strategies register under
FAMILY = {"llada": "mdm", "llada_moe": "mdm", "dream": "dream"}
#: options for rules that bind something of the tokenizer, which random-weight models do not have: PC-Sampler
#: runs on the uniform table (the same work per step as the declared one: one gather of V frequencies)
NO_TOKENIZER = {"pc_sampler": {"pc_background": "none"}}


def build(arch_name: str, config: dict, device: str, dtype=torch.bfloat16) -> LoadedModel:
    """A random model of ``config``'s shape allocated on ``device`` in ``dtype`` (no CPU copy, no file)."""
    arch = architectures.get(arch_name)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            net = DiffusionTransformer(arch.build_args(config))
    finally:
        torch.set_default_dtype(default)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in net.named_parameters():
            p.fill_(1.0) if name.endswith("norm.weight") else p.normal_(0.0, 0.02)
    eos = config["eos_token_id"]
    return LoadedModel(arch=arch, net=net.eval(), tokenizer=None, config=config, mask_id=config["mask_token_id"],
                       eos_id=eos, pad_id=eos, stop_ids=(eos,))


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn) -> float:
    _sync()
    start = time.perf_counter()
    with torch.inference_mode():
        fn()
    _sync()
    return time.perf_counter() - start


def strategies(model, cfg: DecodingConfig, family: str = "mdm") -> dict:
    """label -> run(canvas, gens): every registered rule of ``family`` uncached (``<family>:*``, default
    options), every registered cache that serves the family with low confidence, and each column-selecting
    rule (DPad) under the dual cache; enumerated from the registry, so a new strategy is measured without
    editing this file."""
    def uncached(decode, c: DecodingConfig):
        return lambda canvas, gens: decode(model, canvas, c, gens)

    def cached(c: DecodingConfig, mode: str, rule: str = f"{family}:low_confidence"):
        decode = cached_decoder(decoders.get(rule), mode)
        return lambda canvas, gens: decode(model, canvas, c, gens)

    runners, seen = {}, set()
    for name in decoders.names():
        decode = decoders.get(name)
        if not name.startswith(f"{family}:") or id(decode) in seen:  # another family, or an alias
            continue
        seen.add(id(decode))
        remasking = name.split(":", 1)[1]
        rule_cfg = cfg.model_copy(update={"remasking": remasking, "extra": NO_TOKENIZER.get(remasking, {})})
        runners[name] = uncached(decode, rule_cfg)
        if decode.columns is not None and "dual" in caches.names():
            runners[f"dual+{name}"] = cached(rule_cfg.model_copy(update={"cache": "dual"}), "dual", name)
    for mode in caches.names():
        if family in caches.get(mode).families:
            runners[f"cache:{mode}"] = cached(cfg.model_copy(update={"cache": mode}), mode)
    return runners


def strategy_modes(model, prompt: list[int], gen: int, block: int, batch: int = 1, family: str = "mdm") -> dict:
    """tokens/s and peak memory (MiB) of every strategy of :func:`strategies` on ``batch`` copies of one
    prompt with ``gen`` steps; ``speedup`` over ``<family>:low_confidence`` (the uncached reference)."""
    cfg = DecodingConfig(gen_length=gen, steps=gen, block_length=block)
    out, memory = {}, {}
    for label, run in strategies(model, cfg, family).items():
        canvas = Canvas.build([prompt] * batch, gen, model.mask_id, model.pad_id, model.device)
        gens = [torch.Generator(device=model.device).manual_seed(i) for i in range(batch)]
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        out[label] = round(batch * gen / timed(partial(run, canvas, gens)), 2)
        if torch.cuda.is_available():
            memory[label] = round(torch.cuda.max_memory_allocated() / 2**20)
    reference = out[f"{family}:low_confidence"]
    out["speedup"] = {label: round(v / reference, 2) for label, v in out.items()
                      if label != f"{family}:low_confidence"}
    out["peak_mib"] = memory
    return out


def sdar_block(model, prompt: list[int], gen: int, batch: int = 1) -> dict:
    cfg = DecodingConfig(gen_length=gen, steps=gen, block_length=4, remasking="low_confidence_static")
    decode = decoders.get("block:low_confidence_static")
    canvas = Canvas.build([prompt] * batch, gen, model.mask_id, model.pad_id, model.device)
    gens = [torch.Generator(device=model.device).manual_seed(i) for i in range(batch)]
    return {"block_cache": round(batch * gen / timed(partial(decode, model, canvas, cfg, gens)), 2)}


def external(name: str, path: str, gen: int) -> dict:
    """tokens/s of the lmdeploy / sglang engine on a real SDAR checkpoint (greedy, static, ignore EOS)."""
    from dare.harness.engine import EngineContext, GenerationRequest
    from dare.harness.errors import DareError
    from dare.harness.records import Message
    from dare.harness.registry import engines

    try:
        engine = engines.get(name)(EngineContext(model_name="sdar-8b", model_path=path))
        cfg = DecodingConfig(gen_length=gen, steps=gen, block_length=4, remasking="low_confidence_static",
                             stop_at_eos=False)
        requests = [GenerationRequest(sample_id="q", index=0, seed=0,
                                      messages=(Message(role="user", content="Count from 1 to 1000."),))]
        engine.prepare(requests, cfg)
        engine.generate(requests, cfg)  # warm-up (engine start)
        start = time.perf_counter()
        engine.generate(requests, cfg)
        seconds = time.perf_counter() - start
        engine.close()
        return {"tokens_per_s": round(gen / seconds, 2)}
    except (DareError, ImportError) as exc:
        return {"skipped": str(exc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--block-length", type=int, default=32)
    parser.add_argument("--prompt-length", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1, help="rows decoded together (copies of one prompt)")
    parser.add_argument("--shape", choices=["8b", "small"], default="8b")
    parser.add_argument("--sdar-path", default=None, help="real SDAR checkpoint for lmdeploy / sglang")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device"}))
        return
    results: dict = {"device": torch.cuda.get_device_name(), "shape": args.shape, "batch": args.batch}
    prompt = [(7 * i) % 1000 + 10 for i in range(args.prompt_length)]
    # LLaDA-MoE last: its 64-expert loop is the slowest, and a timeout keeps the figures measured before it
    for arch, config in (("llada", LLADA_8B), ("dream", DREAM_7B), ("sdar", SDAR_8B), ("llada_moe", LLADA_MOE_7B)):
        config = {**config, **(SMALL[arch] if args.shape == "small" else {})}
        model = build(arch, config, "cuda")
        if arch == "sdar":
            runner = partial(sdar_block, model, prompt, batch=args.batch)
        else:
            runner = partial(strategy_modes, model, prompt, block=args.block_length, batch=args.batch,
                             family=FAMILY[arch])
        runner(gen=args.block_length)  # warm-up: kernels, allocator
        results[f"{arch}-{args.shape}"] = {str(g): runner(gen=g) for g in args.lengths}
        print(f"{arch}: {results[f'{arch}-{args.shape}']}", flush=True)
        del model, runner
        torch.cuda.empty_cache()
    for name in ("lmdeploy", "sglang"):
        results[name] = ({str(g): external(name, args.sdar_path, g) for g in args.lengths} if args.sdar_path
                         else {"skipped": "pass --sdar-path DIR (a real SDAR checkpoint) to measure it"})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
