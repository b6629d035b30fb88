"""Build the shipped preference pairs from the project's own verifiers (deterministic).

    python -m dare.trainers.preference.build                 # writes harness/data/{sudoku,countdown}_preference.jsonl
    python -m dare.trainers.preference.build --out DIR --pairs 32

For train prompts drawn with a fixed seed: ``chosen`` is the verifier's gold completion (Sudoku: the
reference grid; Countdown: an expression found by the verifier's solver) and ``rejected`` the same
completion with its answer corrupted (Sudoku: two empty cells swapped or one cell changed; Countdown: an
operator changed or a number replaced). Every chosen completion passes the real verifier and every
rejected one fails it, checked here while building and again by the tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
from collections.abc import Callable
from pathlib import Path

from dare.harness import config as hcfg
from dare.harness.data import DATA_DIR, load_samples
from dare.harness.records import Sample
from dare.harness.verifiers import verifiers

from .pairs import PreferenceRecord, shipped_name

DEFAULT_PAIRS = 128
SEED = 20260530
_ANSWER = "<answer>\n{}\n</answer>"


def corrupt_sudoku(sample: Sample, rng: random.Random) -> tuple[str, str]:
    """A wrong grid (same clues kept) and how it was made."""
    puzzle, grid = str(sample.metadata["puzzle"]), list(str(sample.reference))
    empty = [i for i, p in enumerate(puzzle) if p == "0"]
    if rng.random() < 0.5:
        i, j = rng.sample([a for a in empty if any(grid[b] != grid[a] for b in empty)], 2)
        while grid[i] == grid[j]:
            j = rng.choice(empty)
        grid[i], grid[j] = grid[j], grid[i]
        how = f"cells {i} and {j} swapped"
    else:
        i = rng.choice(empty)
        grid[i] = rng.choice([d for d in "1234" if d != grid[i]])
        how = f"cell {i} changed"
    return _ANSWER.format("".join(grid)), how


def corrupt_countdown(sample: Sample, rng: random.Random, gold: str) -> tuple[str, str]:
    """A wrong expression (operator changed or a number replaced) and how it was made."""
    expression = gold.removeprefix("<answer>\n").removesuffix("\n</answer>")
    operators = [i for i, c in enumerate(expression) if c in "+-*/"]
    if rng.random() < 0.5 and operators:
        i = rng.choice(operators)
        new = rng.choice([o for o in "+-*/" if o != expression[i]])
        return _ANSWER.format(expression[:i] + new + expression[i + 1:]), f"operator {expression[i]!r} -> {new!r}"
    number = str(rng.choice(sample.metadata["numbers"]))
    replacement = str(int(number) + rng.choice([-2, -1, 1, 2]))
    changed = re.sub(rf"(?<!\d){number}(?!\d)", replacement, expression, count=1)
    return _ANSWER.format(changed), f"number {number} -> {replacement}"


def build_pairs(benchmark: str, count: int, seed: int = SEED) -> list[PreferenceRecord]:
    """``count`` verified (gold, corrupted) pairs from the benchmark's train split."""
    spec = hcfg.benchmark(benchmark)
    verifier = verifiers.get(spec.verifier)(**spec.verifier_args)
    samples = load_samples(spec.train)
    rng = random.Random(f"{benchmark}/{seed}")
    corrupt: dict[str, Callable[..., tuple[str, str]]] = {
        "sudoku": lambda s, gold: corrupt_sudoku(s, rng),
        "countdown": lambda s, gold: corrupt_countdown(s, rng, gold),
    }
    records: list[PreferenceRecord] = []
    try:
        order = list(range(len(samples)))
        rng.shuffle(order)  # one fixed order: a smaller count gives a prefix of a larger one
        for index in order:
            sample = samples[index]
            chosen = verifier.gold_completion(sample)
            if chosen is None or not verifier(sample, chosen).passed:
                continue
            rejected, how = corrupt[spec.verifier](sample, chosen)
            verdict = verifier(sample, rejected)
            if verdict.passed:
                continue
            reason = verdict.details.get("reason") or ("invalid grid" if not verdict.details.get("valid") else "")
            records.append(PreferenceRecord(
                id=f"{benchmark}/preference/{len(records)}", benchmark=benchmark, sample_id=sample.id,
                prompt=sample.prompt, reference=sample.reference, metadata=sample.metadata, chosen=chosen,
                rejected=rejected, source=f"chosen: verifier gold; rejected: {how} ({spec.verifier} verifier: "
                f"fails, {reason})"))
            if len(records) == count:
                break
    finally:
        verifier.close()
    return records


def write_pairs(records: list[PreferenceRecord], path: Path) -> str:
    """Write ``records`` as JSONL (sorted keys, one line each); returns the file's sha256."""
    text = "".join(json.dumps(r.model_dump(mode="json"), sort_keys=True, ensure_ascii=False) + "\n" for r in records)
    path.write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dare.trainers.preference.build",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output folder (default: the shipped data folder)")
    parser.add_argument("--pairs", type=int, default=DEFAULT_PAIRS, help="pairs per benchmark")
    parser.add_argument("--benchmarks", nargs="+", default=["sudoku", "countdown"])
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for benchmark in args.benchmarks:
        path = args.out / shipped_name(benchmark)
        digest = write_pairs(build_pairs(benchmark, args.pairs), path)
        print(f"{digest}  {path.name}")  # a script: the MANIFEST.sha256 lines
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
