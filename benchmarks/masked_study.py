"""Why masked-diffusion RL does not lift tiny-llada after 550 SFT steps (trainers/README.md, "Masked diffusion
at this scale"). First the comparison (its start and runs):

    dare-train --compare compare_sudoku_masked --out runs/compare-masked --jobs 2

then, on one CPU thread (about 2 CPU-minutes per algorithm and seed):

    python benchmarks/masked_study.py --start runs/compare-masked/start/train/checkpoints/step-000550 \\
        --runs runs/compare-masked/runs --seeds 0,1,2

Prints (1) per finished run, the share of groups with zero reward variance per step (partial credit, the
reward trained on; exact solving) and the rollouts' exact accuracy over the first and last ten steps;
(2) per algorithm, one training step from the start at the comparison's setting: mean ℓ (the exact
trajectory log-likelihood of the decoding policy at T 1) of the rollouts above / below their group's mean
reward before and after the step, the gap of Δℓ between them on the trained batch and on held-out batches
(the next four steps' prompts, not trained on), the mean Δℓ over held-out rows, and the Spearman rank of the
algorithm's estimate against ℓ. ``--model tiny-sdar`` measures the block comparison's step the same way.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms)
from dare.trainers.experiments.masked_study import GROUP, HELD_OUT, SETTINGS, group_signal, step_effect
from dare.trainers.experiments.uphill import spearman


def mean(values: list[float]) -> float:
    return statistics.mean(values) if values else float("nan")


def signal_table(runs: Path) -> None:
    print("\n| run | steps | zero-variance groups (partial credit) | zero-variance groups (solved) | "
          "rollout accuracy, first 10 steps | last 10 |")
    print("|---|---|---|---|---|---|")
    for run in sorted(p for p in runs.iterdir() if (p / "metrics.jsonl").is_file()):
        rows = group_signal(run)
        if not rows or "zero_variance_groups" not in rows[0]:
            continue  # a run recorded before these metrics existed
        zero = mean([r["zero_variance_groups"] for r in rows])
        solved = mean([r["zero_variance_groups_solved"] for r in rows])
        early, late = mean([r["accuracy"] for r in rows[:10]]), mean([r["accuracy"] for r in rows[-10:]])
        print(f"| {run.name} | {len(rows)} | {zero:.3f} | {solved:.3f} | {early:.3f} | {late:.3f} |")


def effect_table(algorithms: list[str], start: Path, seeds: list[int], model: str, prompts: int | None = None,
                 lr: float | None = None) -> None:
    lr, prompts = lr or SETTINGS[model][0], prompts or SETTINGS[model][1]
    print(f"\n{model}: one step from the start ({prompts} prompts x {GROUP} at T 1, lr {lr:g}, each algorithm's "
          f"inner updates); held out: {HELD_OUT} x {prompts * GROUP} rollouts of other prompts; mean over seeds "
          f"{seeds} [min, max]\n")
    print("| algorithm | ℓ before, A>0 / A<0 | ℓ after, A>0 / A<0 | Δℓ gap, trained batch | Δℓ gap, held out | "
          "mean Δℓ, held out | estimate vs ℓ (Spearman) |")
    print("|---|---|---|---|---|---|---|")
    for algo in algorithms:
        effects = [step_effect(algo, start, seed, model, prompts, lr) for seed in seeds]
        for e in effects:
            print(f"  {algo} seed {e.seed}: gap {e.step.gap:+.4f}, held out {e.held_gap:+.4f} "
                  f"({e.step.seconds:.0f} s)", flush=True)

        def cell(values: list[float], digits: int = 3) -> str:
            return f"{mean(values):+.{digits}f} [{min(values):+.{digits}f}, {max(values):+.{digits}f}]"

        before = [e.before for e in effects]
        after = [e.after for e in effects]
        ranks = [spearman(e.step.proxy, e.step.exact_counted()) for e in effects if e.step.proxy is not None]
        print(f"| {algo} | {mean([b[0] for b in before]):.2f} / {mean([b[1] for b in before]):.2f} | "
              f"{mean([a[0] for a in after]):.2f} / {mean([a[1] for a in after]):.2f} | "
              f"{cell([e.step.gap for e in effects])} | {cell([e.held_gap for e in effects])} | "
              f"{cell([e.held_shift for e in effects])} | {cell(ranks, 2) if ranks else '-'} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", type=Path, help="the comparison's start checkpoint (for --algorithms)")
    ap.add_argument("--runs", type=Path, help="the comparison's runs folder (per-step zero-variance shares)")
    ap.add_argument("--model", default="tiny-llada", choices=sorted(SETTINGS),
                    help="the start's model: tiny-llada (the masked comparison) or tiny-sdar (the block one)")
    ap.add_argument("--algorithms", default="d1,coupled_grpo,rldf", help="comma-separated")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated: the comparison's seeds")
    ap.add_argument("--prompts", type=int, help="prompts per step (default: the comparison's)")
    ap.add_argument("--lr", type=float, help="learning rate (default: the comparison's)")
    args = ap.parse_args()
    if args.algorithms and args.start is None:
        ap.error("--start is needed to step the algorithms (or pass --algorithms '' for the runs' table alone)")
    torch.set_num_threads(1)
    if args.runs:
        signal_table(args.runs)
    if args.algorithms:  # --algorithms "": the runs' table alone
        effect_table(args.algorithms.split(","), args.start, [int(s) for s in args.seeds.split(",")], args.model,
                     args.prompts, args.lr)


if __name__ == "__main__":
    main()
