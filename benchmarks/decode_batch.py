"""Batch scaling of the masked-diffusion decoder and Dream's decode beside LLaDA's, as ratios from one run.

    python benchmarks/decode_batch.py [--model tiny-llada] [--samples 16] [--gen-length 64] [--batch 8]
        [--threads 1] [--repeats 2]

``batch``: the same Sudoku prompts decoded at B=1 and at B=``--batch`` (low-confidence, steps = gen_length,
block 32); tokens/s of each and their ratio. ``forward``: why the ratio is what it is: one network forward
over the decoded canvas, milliseconds per row at B=1 and at B=``--batch``, beside the GEMM rate of the
model's widest linear at those row counts (equal rates mean the network is compute-bound at B=1 already:
batching cannot then raise tokens/s on this device). ``dream_vs_llada``: full-vocabulary tiny hub-layout
checkpoints (LLaDA 126,464 and Dream 152,064 rows; hidden 64) decode the same canvas (4 prompts, gen 32,
one token per step); seconds of each and Dream / LLaDA. ``confidence_ms``: Dream's greedy entropy confidence
for one step's logits (4, 32, 152,064) by the chunked reductions of :mod:`dare.backends.decoding.stats`
against full float64 softmax tensors. Timings are the best of ``--repeats`` (the two batch sizes interleaved).
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from dare.backends.decoding.common import Canvas
from dare.backends.decoding.stats import greedy_stats
from dare.backends.engines.torch import TorchEngine
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.harness import config, prompts
from dare.harness.data import load_samples
from dare.harness.engine import EngineContext, GenerationRequest, request_seed
from dare.harness.records import DecodingConfig

FULL_VOCAB = {"llada": {"vocab_size": 126464, "embedding_size": 126464}, "dream": {"vocab_size": 152064}}


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _requests(n: int) -> list[GenerationRequest]:
    bench = config.benchmark("sudoku")
    template = prompts.template(bench.prompt)
    return [GenerationRequest(sample_id=s.id, index=0, messages=template.render(s), seed=request_seed(0, s.id, 0))
            for s in load_samples(bench.data)[:n]]


def batch_scaling(engine: TorchEngine, requests, gen: int, batch: int, repeats: int) -> dict:
    out, cfgs = {}, {b: DecodingConfig(gen_length=gen, steps=gen, block_length=min(32, gen), batch_size=b)
                     for b in (1, batch)}
    best = {}
    for b, cfg in cfgs.items():
        engine.generate(requests[:b], cfg)  # warm-up
    for _ in range(repeats):  # interleaved, so a change in the machine's load hits both sizes alike
        for b, cfg in cfgs.items():
            best[b] = min(best.get(b, float("inf")), _best(lambda cfg=cfg: engine.generate(requests, cfg), 1))
    for b, seconds in best.items():
        out[f"B{b}"] = {"seconds": round(seconds, 3), "tokens_per_s": round(len(requests) * gen / seconds, 1)}
    out["ratio"] = round(out[f"B{batch}"]["tokens_per_s"] / out["B1"]["tokens_per_s"], 2)
    return out


def forward_scaling(engine: TorchEngine, requests, gen: int, batch: int, repeats: int) -> dict:
    model = engine.model
    ids = [engine.prompt_ids(r.messages) for r in requests[:batch]]
    out = {"canvas_length": max(map(len, ids)) + gen}
    linear = max((m for m in model.net.modules() if isinstance(m, torch.nn.Linear) and m is not model.net.lm_head),
                 key=lambda m: m.weight.numel())
    for b in (1, batch):
        canvas = Canvas.build(ids[:b], gen, model.mask_id, model.pad_id, "cpu")
        mask = canvas.valid[:, None, None, :]
        with torch.inference_mode():
            run = lambda canvas=canvas, mask=mask: model.net(  # noqa: E731
                canvas.tokens, canvas.positions, mask, logits_range=(canvas.gen_start, canvas.gen_start + 32))
            run()
            seconds = _best(lambda run=run: [run() for _ in range(5)], repeats) / 5
            x = torch.randn(b * out["canvas_length"], linear.in_features)
            gemm = _best(lambda x=x: [linear(x) for _ in range(20)], repeats) / 20
        out[f"B{b}"] = {"ms_per_row": round(seconds * 1e3 / b, 2),
                        "gemm_gflops": round(2 * x.shape[0] * linear.weight.numel() / gemm / 1e9, 1)}
    out["ms_per_row_ratio"] = round(out["B1"]["ms_per_row"] / out[f"B{batch}"]["ms_per_row"], 2)
    return out


def dream_vs_llada(requests, repeats: int) -> dict:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arch, remasking in (("llada", "low_confidence"), ("dream", "entropy")):
            path = write_tiny_checkpoint(arch, Path(tmp) / arch, config_overrides=FULL_VOCAB[arch])
            engine = TorchEngine(EngineContext(model_name=f"hub-{arch}", model_path=path, device="cpu"))
            cfg = DecodingConfig(gen_length=32, steps=32, block_length=32, batch_size=4, remasking=remasking)
            engine.generate(requests[:1], cfg)
            out[arch] = {"seconds": round(_best(lambda engine=engine, cfg=cfg: engine.generate(requests[:4], cfg),
                                                repeats), 3)}
    out["ratio"] = round(out["dream"]["seconds"] / out["llada"]["seconds"], 2)
    return out


def confidence_ms(repeats: int) -> dict:
    logits = torch.randn(4, 32, FULL_VOCAB["dream"]["vocab_size"], generator=torch.Generator().manual_seed(0))

    def full():  # what the policies computed before: float64 probabilities over the whole vocabulary
        probs = logits.double().softmax(-1)
        return probs.argmax(-1), (probs * probs.clamp(min=1e-30).log()).sum(-1)

    chunked = _best(lambda: greedy_stats(logits, entropy=True), repeats) * 1e3
    reference = _best(full, repeats) * 1e3
    return {"chunked": round(chunked, 1), "float64_softmax": round(reference, 1),
            "ratio": round(reference / chunked, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny-llada")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--gen-length", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    requests = _requests(args.samples)
    engine = TorchEngine(EngineContext(model_name=args.model, model_spec=config.model(args.model), device="cpu"))
    result = {"model": args.model, "threads": args.threads, "samples": args.samples, "gen_length": args.gen_length,
              "batch_size": args.batch, "machine": f"{torch.get_num_threads()} torch thread(s), CPU "
                                                  f"{torch.backends.cpu.get_cpu_capability()}"}
    result["batch"] = batch_scaling(engine, requests, args.gen_length, args.batch, args.repeats)
    result["forward"] = forward_scaling(engine, requests, args.gen_length, args.batch, args.repeats)
    result["dream_vs_llada"] = dream_vs_llada(requests, args.repeats)
    result["confidence_ms"] = confidence_ms(args.repeats)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
