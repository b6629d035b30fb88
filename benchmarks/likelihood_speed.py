"""DARE's batched likelihood estimator against a one-request-at-a-time loop in the authors' style.

    python benchmarks/likelihood_speed.py [--model tiny-llada | --shape 8b] [--requests 16] [--mc-num 128]
        [--batch 8] [--cfg 0.0] [--device cpu|cuda] [--target-tokens 2 12] [--choices 1] [--check-greedy]

The loop follows ML-GSAI/LLaDA@b7e6c35 eval_llada.py ``get_loglikelihood`` step by step, written here (not
imported): per request, the global RNG seeded with the request's seed, ``mc_num / batch`` iterations of one
forward of ``batch`` full-width rows (plus the unconditional copy under CFG), the cross-entropy of the masked
positions over p_mask, one ``.item()`` per iteration. DARE plans every request's rows from its own
generator, runs each distinct row input once (a request's repeated masks; with ``--choices``, the rows one
question's answers have in common), packs them into shared forward batches and sends only the masked positions
through the LM head. With ``--check-greedy`` both also answer lm-eval's is_greedy: the loop by the authors'
``suffix_greedy_prediction`` (one row, T steps), DARE by ``greedy_matches`` (every request's canvases at once, a
request settled at its first wrong commit); the answers are asserted equal. Both score the same token ids with
the same draws; the values are asserted equal (float32: 1e-5
relative; bfloat16: 2e-2, where logits of a full-width and a gathered LM head round differently).
``--shape 8b`` builds the real LLaDA-8B shape with random bf16 weights on the GPU (as benchmarks/gpu_decode.py).
The last line is one JSON object: seconds of each (CPU seconds of this process on a CPU, wall seconds on a
GPU), the speed ratio, the ratio of the tokens each sends through the network (on a CPU, where both run at
the matrix-product rate, the speed ratio stays close to it), the largest relative difference of the values.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from dare.backends.likelihood.base import Encoded, RowPlan
from dare.backends.likelihood.forward import distinct_rows, score_rows, shared_inputs
from dare.backends.likelihood.masked import LladaMC, LladaOptions, greedy_matches
from dare.backends.models.loader import load_model

ROOT = Path(__file__).resolve().parents[1]


def requests(model, n: int, targets: tuple[int, int] = (2, 12), seed: int = 0, choices: int = 1) -> list[Encoded]:
    """n requests of random ordinary token ids (no mask, EOS or pad id): contexts of 24-64 tokens, targets of
    ``targets`` tokens (inclusive range); ``choices`` consecutive requests share a context (one question's
    answers, as lm-eval's multiple-choice requests)."""
    gen = torch.Generator().manual_seed(seed)
    special = {model.mask_id, model.eos_id, model.pad_id}

    def ordinary(count: int) -> list[int]:
        return [i if i not in special else 16 for i in torch.randint(16, model.net.args.vocab_size, (count,),
                                                                     generator=gen).tolist()]

    out: list[Encoded] = []
    for i in range(n):
        fresh = i % choices == 0  # a question's first answer draws its context
        p = int(torch.randint(24, 65, (), generator=gen)) if fresh else 0
        t = int(torch.randint(targets[0], targets[1] + 1, (), generator=gen))
        ids = ordinary(p + t)
        out.append(Encoded(ids[:p] if fresh else out[-1].prefix, ids[p:], request_id=str(i)))
    return out


def authors_loop(model, enc: Encoded, seed: int, mc_num: int, batch: int, cfg: float) -> float:
    """get_loglikelihood for one request, one iteration's forward at a time (global RNG, CPU draws)."""
    torch.manual_seed(seed)
    seq = torch.tensor(enc.prefix + enc.target, device=model.device)[None].repeat(batch, 1)
    p, t = len(enc.prefix), len(enc.target)
    length = p + t
    positions = torch.arange(length, device=model.device)[None].repeat(batch, 1)
    losses = []
    for _ in range(mc_num // batch):
        k = torch.randint(1, t + 1, ())
        x = torch.round(torch.linspace(float(k), k + (batch - 1) * (t / batch), steps=batch)).long()
        x = ((x - 1) % t) + 1
        is_mask = torch.arange(t).repeat(batch, 1) < x.unsqueeze(1)
        for i in range(batch):
            is_mask[i] = is_mask[i][torch.randperm(t)]
        is_mask = torch.cat([torch.zeros(batch, p, dtype=torch.bool), is_mask], dim=1).to(model.device)
        noisy = torch.where(is_mask, model.mask_id, seq)
        p_mask = (x / t).unsqueeze(1).repeat(1, length).to(model.device)
        if cfg > 0:
            un = noisy.clone()
            un[:, :p] = model.mask_id
            both = model.net(torch.cat([noisy, un]), positions.repeat(2, 1), None).float()
            cond, unc = both.chunk(2)
            logits = unc + (cfg + 1) * (cond - unc)
        else:
            logits = model.net(noisy, positions, None).float()
        loss = F.cross_entropy(logits[is_mask], seq[is_mask], reduction="none") / p_mask[is_mask]
        losses.append((loss.sum() / batch).item())
    return -sum(losses) / len(losses)


def authors_greedy(model, enc: Encoded, cfg: float) -> list[int]:
    """suffix_greedy_prediction for one request: T forwards of one row, the most confident masked position
    committed each step; the decoded target (is_greedy: it equals the request's)."""
    p = len(enc.prefix)
    seq = torch.tensor(enc.prefix + [model.mask_id] * len(enc.target), device=model.device)[None]
    positions = torch.arange(seq.shape[1], device=model.device)[None]
    for _ in range(len(enc.target)):
        mask_index = seq == model.mask_id
        if cfg > 0:
            un = seq.clone()
            un[:, :p] = model.mask_id
            cond, unc = model.net(torch.cat([seq, un]), positions.repeat(2, 1), None).float().chunk(2)
            logits = (unc + (cfg + 1) * (cond - unc))[mask_index]
        else:
            logits = model.net(seq, positions, None).float()[mask_index]
        x0 = torch.argmax(logits, dim=-1)
        confidence = torch.gather(torch.softmax(logits, dim=-1), -1, x0[:, None])[:, 0]
        x0[torch.sort(confidence, descending=True).indices[1:]] = model.mask_id
        seq[mask_index] = x0
    return seq[0, p:].tolist()


def plan_rows(model, encs: list[Encoded], seeds: list[int], estimator: LladaMC) -> list[RowPlan]:
    """Each request's Monte-Carlo rows, drawn from a generator seeded with the request's own seed."""
    return [estimator.plan(e, torch.Generator().manual_seed(s), model.mask_id) for e, s in zip(encs, seeds)]


def dare_batched(model, encs: list[Encoded], seeds: list[int], options: LladaOptions) -> list[tuple[float, bool]]:
    estimator = LladaMC(options)
    plans = plan_rows(model, encs, seeds, estimator)
    nlls = score_rows(model, plans, estimator.cfg)
    greedy = greedy_matches(model, encs, estimator.cfg) if options.check_greedy else [False] * len(encs)
    return [(estimator.reduce(e, plan, nll)[0], g) for e, plan, nll, g in zip(encs, plans, nlls, greedy)]


def token_ratio(model, encs: list[Encoded], seeds: list[int], options: LladaOptions) -> float:
    """Tokens the loop sends through the network over those DARE sends (its distinct row inputs). A CPU forward
    runs at the matrix-product rate whatever its batch, so there the speed ratio stays close to this (without
    the greedy check): fewer tokens is where the time is saved."""
    estimator = LladaMC(options)
    plans = plan_rows(model, encs, seeds, estimator)
    inputs, _ = shared_inputs(plans, [distinct_rows(plan)[0] for plan in plans], estimator.cfg)
    return sum(plan.rows * plan.width for plan in plans) / sum(plans[i].width for i, _ in inputs)


def _sync(model) -> None:
    if model.device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny-llada")
    parser.add_argument("--shape", choices=["8b"], default=None)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--mc-num", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--cfg", type=float, default=0.0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target-tokens", type=int, nargs=2, default=(2, 12), metavar=("MIN", "MAX"),
                        help="continuation lengths (multiple-choice answers: 1-4 for letters, 2-12 for short answers)")
    parser.add_argument("--choices", type=int, default=1,
                        help="consecutive requests sharing one context (4: MMLU's or HellaSwag's questions)")
    parser.add_argument("--check-greedy", action="store_true", help="answer lm-eval's is_greedy too (both sides)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.shape == "8b":
        from gpu_decode import LLADA_8B, build  # benchmarks/ on sys.path when run as a script

        model = build("llada", LLADA_8B, args.device)
    else:
        model = load_model(ROOT / "configs" / "models" / args.model, device=args.device)
    # CPU: this process's CPU seconds (the machine may be shared; one thread); CUDA: wall seconds after a sync
    clock = time.process_time if model.device.type == "cpu" else time.perf_counter
    encs = requests(model, args.requests, tuple(args.target_tokens), choices=args.choices)
    if args.check_greedy:  # every other target is the model's own greedy answer: both is_greedy answers occur
        with torch.inference_mode():
            encs = [Encoded(e.prefix, authors_greedy(model, e, args.cfg), request_id=e.request_id) if i % 2 else e
                    for i, e in enumerate(encs)]
    seeds = list(range(100, 100 + len(encs)))
    options = LladaOptions(mc_num=args.mc_num, batch=args.batch, cfg=args.cfg, check_greedy=args.check_greedy)
    with torch.inference_mode():
        dare_batched(model, encs[:1], seeds[:1], options)  # warm-up (allocator, kernels)
        _sync(model)
        start = clock()
        ours = dare_batched(model, encs, seeds, options)
        _sync(model)
        dare_s = clock() - start
        start = clock()
        theirs = [(authors_loop(model, e, s, args.mc_num, args.batch, args.cfg),
                   args.check_greedy and authors_greedy(model, e, args.cfg) == e.target) for e, s in zip(encs, seeds)]
        _sync(model)
        loop_s = clock() - start
    assert [g for _, g in ours] == [g for _, g in theirs], "is_greedy answers differ"
    worst = max(abs(a - b) / max(abs(b), 1e-9) for (a, _), (b, _) in zip(ours, theirs))
    tolerance = 1e-5 if next(model.net.parameters()).dtype == torch.float32 else 2e-2
    assert worst <= tolerance, f"values differ: {worst:.2e} relative > {tolerance}"
    print(json.dumps({"model": args.shape or args.model, "device": str(model.device), "requests": len(encs),
                      "target_tokens": args.target_tokens, "choices": args.choices,
                      "mc_num": args.mc_num, "batch": args.batch, "cfg": args.cfg, "threads": args.threads,
                      "check_greedy": args.check_greedy, "greedy_true": sum(g for _, g in ours),
                      "dare_s": round(dare_s, 3), "authors_loop_s": round(loop_s, 3),
                      "speedup": round(loop_s / dare_s, 2),
                      "token_ratio": round(token_ratio(model, encs, seeds, options), 2), "max_rel_diff": worst}))


if __name__ == "__main__":
    main()
