"""Does one update point uphill? The tables of trainers/README.md ("Does the update point uphill?").

    python benchmarks/uphill.py                      # seed 0: the batch of tests/trainers/test_uphill.py
    python benchmarks/uphill.py --seeds 0,1,2,3      # the gap per seed, rank correlations averaged

For every RL algorithm on each model family its paper allows: one step of the local trainer on a fixed
rollout batch (:mod:`dare.trainers.experiments.uphill`: tiny models on Sudoku, 4 prompts x 4 samples at
temperature 2, one AdamW update at lr 1e-4), then the mean change of the exact trajectory log-likelihood ℓ
(the decoding policy's, at the rollout temperature) over rows with A > 0 and A < 0, their gap, and the gap
of the same step trained on -A (measured against the true advantages: it should be negative). Then how
well each algorithm's own likelihood estimate ranks the batch's rollouts against ℓ (Spearman), over all
rows and within each prompt's group. One CPU thread: about 5 minutes a seed.
"""

from __future__ import annotations

import argparse
import math
import statistics

import torch

from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms)
from dare.trainers.experiments.uphill import CASES, GROUP, LR, PROMPTS, TEMPERATURE, measure, spearman

EXACT = {"mdm_trajectory", "block_trajectory", "autoregressive"}  # replays of the rollout's own steps


def within_groups(values: torch.Tensor, target: torch.Tensor, groups: torch.Tensor) -> list[float]:
    """Spearman inside each prompt's group (groups whose ℓ or estimate are all equal are left out)."""
    out = []
    for g in groups.unique():
        rows = groups == g
        if values[rows].unique().numel() > 1 and target[rows].unique().numel() > 1:
            out.append(spearman(values[rows], target[rows]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (rollout prompts, samples and noise)")
    ap.add_argument("--lr", type=float, default=LR)
    ap.add_argument("--only", help="comma-separated algorithm names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    only = set(args.only.split(",")) if args.only else None
    gaps, ranks = [], []
    for algo, model in CASES:
        if only and algo not in only:
            continue
        for seed in seeds:
            up = measure(algo, model, lr=args.lr, seed=seed, at_t1=True)
            down = measure(algo, model, lr=args.lr, seed=seed, flip=True)
            gaps.append((algo, model, seed, up, down))
            if up.proxy is not None:
                exact = up.exact_counted()
                ranks.append((algo, model, up.estimator, spearman(up.proxy, exact),
                              spearman(up.proxy, up.exact_counted(t1=True)), within_groups(up.proxy, exact, up.groups)))
            print(f"{algo} {model} seed {seed}: gap {up.gap:+.4f}, trained on -A {down.gap:+.4f} "
                  f"({up.seconds + down.seconds:.0f} s)", flush=True)

    first = seeds[0]
    print(f"\nlr {args.lr}; mean Δℓ in nats per rollout (ℓ: the trajectory log-likelihood, every committed token, "
          f"at the rollout temperature); seed {first}" + (f", range over seeds {args.seeds}" if len(seeds) > 1 else ""))
    print("\n| algorithm | model | estimator | Δℓ A>0 | Δℓ A<0 | gap | gap, trained on -A |"
          + (" gap over seeds | on -A over seeds |" if len(seeds) > 1 else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if len(seeds) > 1 else ""))
    cases: dict[tuple, list] = {}
    for algo, model, seed, up, down in gaps:
        cases.setdefault((algo, model), []).append((seed, up, down))
    for (algo, model), runs in cases.items():
        _, up, down = runs[0]
        line = (f"| {algo} | {model} | {up.estimator} | {up.mean_delta(+1):+.3f} | {up.mean_delta(-1):+.3f} | "
                f"**{up.gap:+.3f}** | {down.gap:+.3f} |")
        if len(seeds) > 1:
            ups, downs = [u.gap for _, u, _ in runs], [d.gap for _, _, d in runs]
            line += f" {min(ups):+.3f} .. {max(ups):+.3f} | {min(downs):+.3f} .. {max(downs):+.3f} |"
        print(line)

    print("\nRank correlation of the estimate with ℓ over the tokens the algorithm counts (Spearman, mean over seeds; "
          "[min, max])\n")
    print(f"| estimator | kind | algorithm | model | vs ℓ at T {TEMPERATURE:g}, {PROMPTS * GROUP} rollouts | "
          f"vs ℓ at T 1 | within a prompt's {GROUP} |")
    print("|---|---|---|---|---|---|---|")
    merged: dict[tuple, list] = {}
    for algo, model, est, rho, rho1, inner in ranks:
        merged.setdefault((est, algo, model), []).append((rho, rho1, inner))
    for (est, algo, model), rows in merged.items():
        rho = statistics.mean(r[0] for r in rows)
        rho1 = statistics.mean(r[1] for r in rows)
        inner = [x for r in rows for x in r[2]]
        within = f"{statistics.mean(inner):+.2f} ({len(inner)} groups)" if inner else "-"
        kind = "exact" if est in EXACT else "proxy"
        spread = f" [{min(r[0] for r in rows):+.2f}, {max(r[0] for r in rows):+.2f}]" if len(rows) > 1 else ""
        print(f"| `{est}` | {kind} | {algo} | {model} | {rho:+.2f}{spread} | {rho1:+.2f} | {within} |")
    if any(math.isnan(up.gap) for *_, up, _ in gaps):
        print("\nnan: a batch without rollouts of one advantage sign")


if __name__ == "__main__":
    main()
