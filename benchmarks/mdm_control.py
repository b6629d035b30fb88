"""A from-scratch masked-diffusion SFT loop: the control for dare-train's masked-diffusion SFT on Sudoku.

    python benchmarks/mdm_control.py --init /tmp/tiny-llada-init --steps 400 [--qk-norm] [--weighting none]

It shares only the data with dare-train (the same prompts and gold answers padded with EOS to the 32-token
canvas) and the network class; masking, attention mask, positions, loss, optimiser and schedule are its
own: t ~ U(eps, 1), each canvas token masked with probability t, loss = sum of masked CE / t over the
canvas tokens (LLaDA's SFT objective), AdamW with warmup and cosine decay. Every ``--every`` steps it prints
the mean loss and the argmax accuracy on answer cells hidden at t = 0.05 (all but about one cell visible)
in 256 held-out train rows. ``--qk-norm`` builds the same network with per-head RMSNorm on queries and keys
(the Qwen3 / SDAR attention; LLaDA has none). Measured curves: trainers/README.md, "Why tiny-llada did not learn".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import torch

from dare.backends.engines.torch import TorchEngine
from dare.backends.models.transformer import DiffusionTransformer
from dare.harness.engine import EngineContext
from dare.trainers.training.data import batch_indices, train_items
from dare.trainers.training.rollout import Verifiers, supervised_batch


def forward(net, prompt, mask, canvas):
    """prompt/mask (B, P) left-padded, canvas (B, T) -> logits of the canvas (B, T, V); bidirectional."""
    tokens = torch.cat([prompt, canvas], 1)
    valid = torch.cat([mask, torch.ones_like(canvas, dtype=torch.bool)], 1)
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    attend = valid[:, None, None, :] | torch.eye(tokens.shape[1], dtype=torch.bool)
    return net(tokens, positions, attend)[:, prompt.shape[1]:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--weighting", choices=("inv_t", "none"), default="inv_t")
    ap.add_argument("--qk-norm", action="store_true")
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    engine = TorchEngine(EngineContext(model_name="control", model_path=a.init, options={"dtype": "float32"}))
    loaded, mask_id = engine.model, engine.model.mask_id
    net = loaded.net.requires_grad_(True).train()
    if a.qk_norm:
        net = DiffusionTransformer(dataclasses.replace(net.args, qk_norm=True))
        net.init_random(torch.Generator().manual_seed(0), std=0.02)
    items, verifiers = train_items("sudoku"), Verifiers()
    held = supervised_batch(engine, items[-256:], verifiers, True, 32)
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (
        1 + math.cos(math.pi * min(s, a.steps) / a.steps)))
    gen, losses = torch.Generator().manual_seed(a.seed), []
    for step in range(a.steps):
        idx = batch_indices(len(items) - 256, a.batch, step, a.seed)
        b = supervised_batch(engine, [items[i] for i in idx], verifiers, True, 32)
        y = b.completion_ids
        t = 1e-3 + (1 - 1e-3) * torch.rand(y.shape[0], 1, generator=gen)
        masked = torch.rand(y.shape, generator=gen) < t
        logits = forward(net, b.prompt_ids, b.prompt_mask, y.masked_fill(masked, mask_id))
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none")
        weight = masked / t if a.weighting == "inv_t" else masked.float()
        loss = (ce * weight).sum() / (y.numel() if a.weighting == "inv_t" else masked.sum().clamp(min=1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if (step + 1) % a.every == 0:
            with torch.no_grad():
                y = held.completion_ids
                hidden = torch.rand(y.shape, generator=torch.Generator().manual_seed(1)) < 0.05
                hidden[:, 1:17] |= ~hidden[:, 1:17].any(1, keepdim=True) & (torch.arange(16) == 7)
                pred = forward(net, held.prompt_ids, held.prompt_mask, y.masked_fill(hidden, mask_id)).argmax(-1)
                cells = hidden[:, 1:17]
                acc = float((pred[:, 1:17] == y[:, 1:17])[cells].float().mean())
            print(json.dumps({"step": step + 1, "loss": round(sum(losses) / len(losses), 4),
                              "cell_acc_t0.05": round(acc, 3)}), flush=True)
            losses = []


if __name__ == "__main__":
    main()
