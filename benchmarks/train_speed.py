"""Training-step speed: packed vs padded batches, and FlexAttention's block mask vs a dense 2L mask.

    python benchmarks/train_speed.py [--device cpu|cuda] [--hidden 256] [--layers 4] [--batch 8]
                                     [--min-len 64] [--max-len 512] [--repeats 3] [--threads 2]

1. packed vs padded: one SFT forward + backward (block-diffusion ELBO on the ``[noisy | clean]`` pair, the
   costliest training forward) on a batch whose sequence lengths are spread uniformly in
   [min-len, max-len], first padded to the longest row, then packed padding-free (dare.trainers.training.packing).
2. block mask vs dense 2L: the attention of that pair alone, SDPA with the dense (2L x 2L) boolean mask
   against ``flex_attention`` with a ``BlockMask`` built from the same rule (compiled; skipped where
   FlexAttention cannot run). Ratios > 1 mean the second variant is faster.
3. logits-free CE: log p(targets) + backward through the LM head for ``--ce-tokens`` positions and a
   ``--vocab`` vocabulary, chunked under checkpointing (dare.trainers.training.policy.linear_logp) vs full logits;
   time and, on CUDA, peak memory above the inputs.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import torch

from dare.backends.models.loader import load_model
from dare.backends.models.tiny import write_tiny_checkpoint
from dare.trainers import build_estimator
from dare.trainers.batch import RolloutBatch
from dare.trainers.training.policy import ModelPolicy
from dare.trainers.training.sequences import noisy_clean_mask


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str, repeats: int) -> float:
    fn()  # warm-up (and compilation)
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        _sync(device)
        best = min(best, time.perf_counter() - began)
    return best


def variable_batch(rows: int, lo: int, hi: int, vocab: int, device: str) -> RolloutBatch:
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(lo, hi + 1, (rows,), generator=g)
    prompt = 16
    width = int(lengths.max()) - prompt
    attn = torch.arange(width)[None] < (lengths - prompt)[:, None]
    return RolloutBatch(
        prompt_ids=torch.randint(0, vocab - 40, (rows, prompt), generator=g),
        prompt_mask=torch.ones(rows, prompt, dtype=torch.bool),
        completion_ids=torch.randint(0, vocab - 40, (rows, width), generator=g),
        completion_mask=attn, completion_attn=attn, group_ids=torch.arange(rows)).to(device)


def packed_vs_padded(loaded, args) -> dict:
    batch = variable_batch(args.batch, args.min_len, args.max_len, loaded.net.args.vocab_size, args.device)
    est = build_estimator("block_elbo", {})
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    out = {}
    for name, packed in (("padded", False), ("packed", True)):
        policy = ModelPolicy(loaded, block_size=4, packed=packed)

        def step(policy=policy):
            loaded.net.zero_grad(set_to_none=True)
            loss = -(est.estimate(policy, batch, noise).token_logp * batch.completion_mask).sum()
            loss.backward()

        out[f"{name}_step_s"] = round(timed(step, args.device, args.repeats), 5)
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
            with profile(activities=activities) as prof:
                step()
                _sync(args.device)
            key = "cuda_time_total" if args.device.startswith("cuda") else "cpu_time_total"
            print(f"--- {name}\n" + prof.key_averages().table(sort_by=key, row_limit=12), flush=True)
    out["packed_speedup"] = round(out["padded_step_s"] / out["packed_step_s"], 3)
    real = int(batch.prompt_mask.sum() + batch.completion_attn.sum())
    total = batch.size * (batch.prompt_ids.shape[1] + batch.completion_ids.shape[1])
    out["padding_share"] = round(1 - real / total, 3)
    return out


def flex_vs_dense(args) -> dict:
    heads, dim, length, block = 8, 64, args.max_len, 4
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    q, k, v = (torch.randn(args.batch, heads, 2 * length, dim, device=args.device, dtype=dtype) for _ in range(3))
    positions = torch.arange(length, device=args.device)[None].expand(args.batch, -1)
    valid = torch.ones(args.batch, length, dtype=torch.bool, device=args.device)
    dense = noisy_clean_mask(positions, valid, block)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    out = {"dense_2l_attention_s": round(timed(lambda: sdpa(q, k, v, attn_mask=dense), args.device, args.repeats), 6)}
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def rule(b, h, qi, ki):
            q_noisy, k_noisy = qi < length, ki < length
            qb, kb = (qi % length) // block, (ki % length) // block
            noisy = q_noisy & ((k_noisy & (qb == kb)) | (~k_noisy & (kb < qb)))
            clean = ~q_noisy & ~k_noisy & (kb <= qb)
            return noisy | clean

        mask = create_block_mask(rule, None, None, 2 * length, 2 * length, device=args.device)
        flex = torch.compile(flex_attention)
        same = torch.allclose(flex(q, k, v, block_mask=mask).float(), sdpa(q, k, v, attn_mask=dense).float(),
                              atol=2e-2 if dtype == torch.bfloat16 else 1e-4)
        out["flex_block_mask_s"] = round(timed(lambda: flex(q, k, v, block_mask=mask), args.device, args.repeats), 6)
        out["flex_speedup_vs_dense"] = round(out["dense_2l_attention_s"] / out["flex_block_mask_s"], 3)
        out["flex_matches_dense"] = bool(same)
        out["block_mask_density"] = round(float(dense.float().mean()), 4)
    except Exception as exc:  # FlexAttention needs a compiler backend; report why it did not run
        out["flex_block_mask"] = f"unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return out


def logits_free_ce(args) -> dict:
    from dare.trainers.training.policy import linear_logp

    cuda = args.device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    g = torch.Generator().manual_seed(0)
    h = (torch.randn(args.ce_tokens, args.ce_hidden, generator=g) * 0.02).to(args.device, dtype).requires_grad_()
    w = (torch.randn(args.vocab, args.ce_hidden, generator=g) * 0.02).to(args.device, dtype).requires_grad_()
    y = torch.randint(0, args.vocab, (args.ce_tokens,), generator=g).to(args.device)

    def dense():
        h.grad = w.grad = None
        (h @ w.T).float().log_softmax(-1).gather(-1, y[:, None]).sum().backward()

    def chunked():
        h.grad = w.grad = None
        linear_logp(h, w, y, chunk=args.ce_chunk)[0].sum().backward()

    out = {"ce_tokens": args.ce_tokens, "vocab": args.vocab}
    for name, fn in (("dense_logits", dense), ("logits_free", chunked)):
        out[f"{name}_s"] = round(timed(fn, args.device, args.repeats), 5)
        if cuda:
            torch.cuda.empty_cache()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn()
            torch.cuda.synchronize()
            out[f"{name}_peak_gib"] = round((torch.cuda.max_memory_allocated() - base) / 2 ** 30, 3)
    if cuda:
        out["logits_free_memory_saving"] = round(out["dense_logits_peak_gib"] / out["logits_free_peak_gib"], 2)
    out["logits_free_time_ratio"] = round(out["dense_logits_s"] / out["logits_free_s"], 3)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--min-len", type=int, default=64)
    p.add_argument("--max-len", type=int, default=512)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--vocab", type=int, default=32000, help="vocabulary of the CE measurement (LLaDA: 126464)")
    p.add_argument("--ce-tokens", type=int, default=2048)
    p.add_argument("--ce-hidden", type=int, default=256)
    p.add_argument("--ce-chunk", type=int, default=1024)
    p.add_argument("--profile", action="store_true", help="print the top operators of each variant")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        overrides = {"hidden_size": args.hidden, "intermediate_size": 4 * args.hidden, "num_hidden_layers": args.layers,
                     "head_dim": 64, "num_attention_heads": max(1, args.hidden // 64),
                     "num_key_value_heads": max(1, args.hidden // 128)}
        path = write_tiny_checkpoint("sdar", tmp, config_overrides=overrides)
        loaded = load_model(path, device=args.device, dtype=torch.float32)
        loaded.net.requires_grad_(True)
        result = {"device": args.device, "hidden": args.hidden, "layers": args.layers, "batch": args.batch,
                  "lengths": [args.min_len, args.max_len]}
        result.update(packed_vs_padded(loaded, args))
    result.update(flex_vs_dense(args))
    result.update(logits_free_ce(args))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
