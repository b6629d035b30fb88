"""Variance of the DPO preference score under VRPO's variance-reduction steps, on a real (tiny) dLLM.

    python benchmarks/preference_variance.py [--model tiny-llada] [--suite sudoku] [--pairs 4] [--repeats 20]
                                             [--perturb 0.02] [--threads 2]

The preference score of a pair is s = (B_theta(y_w) - B_ref(y_w)) - (B_theta(y_l) - B_ref(y_l)), the quantity
inside the DPO log-sigmoid; VRPO bounds the loss's bias and variance by Var(s). The policy is the shipped
model with Gaussian noise of relative size ``--perturb`` on every weight (theta near ref, as during training);
the pairs are the suite's shipped preference pairs, rendered with the evaluation prompt. For each estimator
setting, s is estimated ``--repeats`` times with fresh noise and its standard deviation reported per pair
(mean over pairs), with the ratio to plain DPO (one draw, independent reference noise). The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from dare.harness.engine import EngineContext
from dare.harness.models import resolve
from dare.harness.registry import engines
from dare.trainers import build_estimator
from dare.trainers.preference.pairs import preference_batch, preference_items
from dare.trainers.training.policy import ModelPolicy

SETTINGS = {  # name: (estimator, options, shared noise with the reference)
    "dpo_n1_independent": ("mc_elbo", {"samples": 1}, False),
    "n4_iid_independent": ("mc_elbo", {"samples": 4}, False),
    "n4_iid_shared": ("mc_elbo", {"samples": 4}, True),
    "vrpo_n4_stratified_shared": ("stratified_elbo", {"samples": 4}, True),
}


def load_policy(model: str, device: str) -> tuple[object, ModelPolicy]:
    resolved = resolve(model, None)
    ctx = EngineContext(model_name=resolved.name, model_spec=resolved.spec, model_path=resolved.path, device=device,
                        options={"dtype": "float32"})
    engine = engines.get("torch")(ctx)
    return engine, ModelPolicy(engine.model)


def scores(estimator, policy, reference, batch, shared: bool, generator) -> torch.Tensor:
    """One estimate of s per pair: (pairs,)."""
    noise = estimator.draw(batch, generator)
    ref_noise = noise if shared else estimator.draw(batch, generator)
    mask = batch.completion_mask.double()
    elbo = (estimator.estimate(policy, batch, noise).token_logp.double() * mask).sum(-1)
    ref = (estimator.estimate(reference, batch, ref_noise).token_logp.double() * mask).sum(-1)
    delta = elbo - ref
    return delta[0::2] - delta[1::2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny-llada")
    p.add_argument("--suite", default="sudoku")
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--perturb", type=float, default=0.02)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    engine, reference = load_policy(args.model, args.device)
    _, policy = load_policy(args.model, args.device)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in policy.net.parameters():
            param.add_(args.perturb * param.abs().mean() * torch.randn(param.shape, generator=g).to(param))
    batch = preference_batch(engine, preference_items(args.suite)[:args.pairs], count_padding=False).to(args.device)
    out: dict[str, object] = {"model": args.model, "suite": args.suite, "pairs": args.pairs, "repeats": args.repeats,
                              "perturb": args.perturb}
    began = time.perf_counter()
    with torch.no_grad():
        for name, (est_name, options, shared) in SETTINGS.items():
            est = build_estimator(est_name, options)
            gen = torch.Generator().manual_seed(1)
            draws = torch.stack([scores(est, policy, reference, batch, shared, gen) for _ in range(args.repeats)])
            out[f"{name}_std"] = round(float(draws.std(0).mean()), 4)
            out[f"{name}_mean"] = round(float(draws.mean()), 4)
    base = out["dpo_n1_independent_std"]
    for name in SETTINGS:
        out[f"{name}_std_ratio_to_dpo"] = round(out[f"{name}_std"] / base, 4) if base else None
    out["seconds"] = round(time.perf_counter() - began, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
