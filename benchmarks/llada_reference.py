"""LLaDA's official ``generate`` beside ``mdm:low_confidence`` on a full-vocabulary tiny LLaDA, one run.

    python benchmarks/llada_reference.py --reference PATH/generate.py [--gen-length 256]
        [--block-length 256] [--sample 0] [--threads 1] [--fixture OUT.json]
    python benchmarks/llada_reference.py --replay 46 [--gen-length 256] [--block-length 32]

``--reference`` is ML-GSAI/LLaDA's ``generate.py`` read from a checkout (never copied here). Its
``generate`` drives our network (the hub-layout tiny LLaDA: 126,464 vocabulary rows, hidden 64, seed 0;
the byte-level tokenizer makes a Sudoku prompt 733 tokens) through ``model(x).logits``, so both sides see
the same logits function and differ only in the decoding loop. Greedy, one token per step
(steps = gen_length). One JSON line: seconds of each, speed ratio, the tokens that differ and, where they
do, the first step at which the two commit different positions with both sides' top-2 confidences there
(the official softmax runs in the logits' float32; ours is one float64 pass, :mod:`dare.backends.decoding.stats`).
``--fixture`` writes that step's canvas and confidences as JSON (to pin a near-tie in a test).

``--replay N`` is the cheap scan over Sudoku samples 0..N-1 (no checkout needed): our decode, and at every
step the official commit rule restated from generate.py (``F.softmax`` of the float32 logits,
``torch.topk`` of the proposals' probabilities) on the same logits, which equal the full-canvas logits
bit for bit on CPU; one JSON line per sample: steps where the two rules pick differently, and the
smallest relative top-2 gap (float64) with its step.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time
import types
from pathlib import Path

import torch
import torch.nn.functional as F

from dare.backends.decoding import llada
from dare.backends.decoding.common import Canvas
from dare.backends.decoding.mdm import decode_masked_diffusion
from dare.backends.decoding.stats import greedy_stats
from dare.backends.engines.torch import TorchEngine
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.harness import config, prompts
from dare.harness.data import load_samples
from dare.harness.engine import EngineContext
from dare.harness.records import DecodingConfig
from dare.harness.registry import decoders

FULL_VOCAB = {"vocab_size": 126464, "embedding_size": 126464}


def hub_llada(directory: Path):
    """The hub-layout tiny LLaDA (seed 0) as a torch engine's loaded model."""
    path = write_tiny_checkpoint("llada", directory / "llada", config_overrides=FULL_VOCAB)
    engine = TorchEngine(EngineContext(model_name="hub-llada", model_path=path, device="cpu"))
    return engine, engine.model


def confidences(model, x: torch.Tensor, lo: int, hi: int) -> dict:
    """Both sides' greedy confidences of canvas columns lo..hi-1 for the canvas ``x`` (1, L): the official
    float32 softmax over full-canvas logits, ours from the block's logits window in float64."""
    positions = torch.arange(x.shape[1])[None]
    keys = torch.ones(1, 1, 1, x.shape[1], dtype=torch.bool)  # no padding: every key valid, as mdm._forward passes
    with torch.inference_mode():
        full = model.net(x, positions, None)[0, lo:hi]  # (K, V): what the official loop sees
        window = model.net(x, positions, keys, logits_range=(lo, hi))[0]  # (K, V): what ours sees
    x0 = full.argmax(-1)
    official = F.softmax(full, dim=-1).gather(-1, x0[:, None])[:, 0]
    ours = greedy_stats(window[None])
    return {"x0": x0, "official": official, "ours": ours["p"][0], "ours_x0": ours["x0"][0],
            "window_vs_full": (window - full).abs().max().item()}


def _commits_per_step(states: list[torch.Tensor], final: torch.Tensor, start: int) -> list[list[int]]:
    seq = states + [final]
    return [sorted((c - start) for c in (seq[i + 1][0] != seq[i][0]).nonzero().flatten().tolist())
            for i in range(len(states))]


def replay(engine, model, sample: int, gen: int, block: int) -> dict:
    """Our decode of ``sample`` with the official rule evaluated beside it at every step (see the module doc)."""
    bench = config.benchmark("sudoku")
    ids = engine.prompt_ids(prompts.template(bench.prompt).render(load_samples(bench.data)[sample]))
    differ, gaps = [], []

    def watched(logits, masked, quota, step, steps, gens, cfg, opts, m):
        commit, x0 = llada.low_confidence(logits, masked, quota, step, steps, gens, cfg, opts, m)
        p32 = F.softmax(logits[0], dim=-1).gather(-1, x0[0][:, None])[:, 0]
        official = torch.zeros_like(masked[0])
        official[torch.topk(p32.masked_fill(~masked[0], float("-inf")), k=int(quota[0])).indices] = True
        if not torch.equal(official, commit[0] & masked[0]):
            differ.append(len(gaps))
        conf = greedy_stats(logits)["p"][0]
        chosen, left = conf[commit[0] & masked[0]], conf[masked[0] & ~commit[0]]
        gaps.append(((chosen.min() - left.max()) / chosen.min()).item() if len(left) else 1.0)
        return commit, x0

    cfg = DecodingConfig(gen_length=gen, steps=gen, block_length=block)
    canvas = Canvas.build([ids], gen, model.mask_id, model.pad_id, "cpu")
    with torch.inference_mode():
        decode_masked_diffusion(model, canvas, cfg, llada.LladaOptions(), [torch.Generator().manual_seed(0)], watched)
    step = min(range(len(gaps)), key=gaps.__getitem__)
    return {"sample": sample, "steps_differ": differ, "smallest_gap": gaps[step], "at_step": step}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--replay", type=int, default=0, help="scan samples 0..N-1 with the restated official rule")
    parser.add_argument("--gen-length", type=int, default=256)
    parser.add_argument("--block-length", type=int, default=256)
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fixture", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.replay:
        with tempfile.TemporaryDirectory() as tmp:
            engine, model = hub_llada(Path(tmp))
            for sample in range(args.replay):
                print(json.dumps(replay(engine, model, sample, args.gen_length, args.block_length)), flush=True)
        return
    if args.reference is None:
        parser.error("--reference PATH/generate.py (or --replay N)")
    spec = importlib.util.spec_from_file_location("llada_reference_generate", args.reference)
    official = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(official)
    gen, block = args.gen_length, args.block_length
    with tempfile.TemporaryDirectory() as tmp:
        engine, model = hub_llada(Path(tmp))
        bench = config.benchmark("sudoku")
        ids = engine.prompt_ids(prompts.template(bench.prompt).render(load_samples(bench.data)[args.sample]))
        states: list[torch.Tensor] = []

        class Reference:
            device = torch.device("cpu")

            def __call__(self, x, attention_mask=None):
                states.append(x.clone())
                positions = torch.arange(x.shape[1])[None].expand(x.shape[0], -1)
                return types.SimpleNamespace(logits=model.net(x, positions, None))

        start = time.perf_counter()
        theirs = official.generate(Reference(), torch.tensor([ids]), steps=gen, gen_length=gen, block_length=block,
                                   mask_id=model.mask_id)
        official_s = time.perf_counter() - start
        cfg = DecodingConfig(gen_length=gen, steps=gen, block_length=block)
        canvas = Canvas.build([ids], gen, model.mask_id, model.pad_id, "cpu")
        start = time.perf_counter()
        with torch.inference_mode():
            ours = decoders.get("mdm:low_confidence")(model, canvas, cfg, [torch.Generator().manual_seed(0)])
        ours_s = time.perf_counter() - start
        differ = (theirs[0, len(ids):] != ours.tokens[0]).nonzero().flatten().tolist()
        result = {"prompt_tokens": len(ids), "gen_length": gen, "block_length": block,
                  "official_s": round(official_s, 2), "ours_s": round(ours_s, 2),
                  "speed_ratio": round(official_s / ours_s, 2), "tokens_differ": differ}
        if differ:
            result["first_difference"] = first_difference(model, states, theirs, ours, ids, block, args.fixture)
    print(json.dumps(result))


def first_difference(model, states, theirs, ours, ids, block: int, fixture: Path | None) -> dict:
    """The first step whose committed positions differ, with both sides' top-2 confidences there."""
    official_commits = _commits_per_step(states, theirs, len(ids))
    by_step: dict[int, list[int]] = {}
    for j, s in enumerate(ours.commit_step[0].tolist()):
        by_step.setdefault(s, []).append(j)
    step = next(i for i, c in enumerate(official_commits) if c != sorted(by_step.get(i, [])))
    x = states[step]  # the canvas before that step: identical on both sides (every earlier commit agreed)
    lo = len(ids) + (step // block) * block  # steps = gen_length: a block's steps are its length
    conf = confidences(model, x, lo, lo + block)
    masked = (x[0, lo:lo + block] == model.mask_id).nonzero().flatten().tolist()

    def top2(values):
        best = sorted(masked, key=lambda k: -values[k].item())[:2]
        return [{"position": lo - len(ids) + k, "confidence": values[k].item()} for k in best]

    out = {"step": step, "official_commits": official_commits[step], "ours_commits": by_step.get(step, []),
           "official_top2_float32": top2(conf["official"]), "ours_top2_float64": top2(conf["ours"]),
           "window_vs_full_logits_max_abs": conf["window_vs_full"],
           "float32_spacing_at_top": float(torch.finfo(torch.float32).eps * conf["official"].max().item())}
    if fixture is not None:
        fixture.write_text(json.dumps({"canvas": x[0].tolist(), "lo": lo, "block": block, "step": step, **out}))
    return out


if __name__ == "__main__":
    main()
