"""Regenerate the README's measured comparison figures from run records, never by hand.

    python benchmarks/readme_figures.py README.md compare_sudoku_block=runs/compare-block \\
        compare_sudoku_masked=runs/compare-masked compare_sudoku_masked_lr1e4=runs/compare-masked-lr1e4 [--check]

Each ``CONFIG=DIR`` pair names a comparison config (configs/experiments or a path) and the ``--out`` that
``dare-train --compare CONFIG --out DIR`` wrote; ``CONFIG@TAG=DIR`` fills the block named ``CONFIG@TAG`` from
a second ``--out`` of the same config (runs of it made elsewhere, e.g. on another CPU, with their own start).
The README block between

    <!-- readme_figures: CONFIG -->
    ...
    <!-- /readme_figures -->

is replaced by the table rebuilt from DIR's evaluation records (run.json + samples.jsonl: metrics,
intervals, paired changes from the start; for a comparison over seeds, the table over seeds then each
seed's) and training logs (CPU seconds per logged step), followed by
one line of what those records say the results depend on (torch threads, deterministic switch, CPU model
and capability, torch version, start CPU seconds). ``--check`` changes nothing and exits 1 when the README
differs from the records (for CI once the records are kept). The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from dare.harness.cliutil import run_cli
from dare.harness.errors import InputError
from dare.harness.records import RunRecord
from dare.trainers.experiments.compare import load_comparison
from dare.trainers.experiments.tables import comparison_rows, comparison_tables
from dare.trainers.training.evaluate import read_eval_marker

BLOCK = re.compile(r"(<!-- readme_figures: (?P<name>[\w./@-]+) -->\n)(?P<body>.*?)(<!-- /readme_figures -->)", re.S)


def _start(out: Path, comparison) -> tuple[str, Path, Path | None]:
    """(label, evaluation record dir, training run dir or None) of the comparison's start, as the runner
    placed them (trainers/compare.py: ComparisonRunner.baseline)."""
    start = comparison.start
    label = start.label or start.model or start.recipe
    folder = out / "start" / ("train" if start.recipe else "")
    baseline = read_eval_marker(folder)
    if baseline is None:
        raise InputError(f"{out} holds no evaluated start ({folder}/eval_run.txt); run dare-train --compare first")
    return label, baseline, folder if start.recipe else None


def _train_cpu(run_dir: Path) -> float:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return round(sum(r.get("cpu_s", 0.0) for r in rows), 1)


def _depends_on(rows: list[dict[str, Any]], start_dir: Path | None) -> str:
    """One line: the execution facts the records hold (every distinct value, so a mix is visible)."""
    envs = [RunRecord.model_validate_json((Path(r["eval_run"]) / "run.json").read_text()).environment for r in rows]

    def values(key: str) -> str:
        found = sorted({str(getattr(e, key)) if key in e.model_fields_set else "?" for e in envs})
        return "/".join(found)

    parts = [f"torch {values('torch')}", f"{values('torch_threads')} torch thread(s)",
             f"deterministic algorithms {values('deterministic_algorithms')}",
             f"CPU {values('cpu')}", f"CPU capability {values('cpu_capability')}"]
    train = sum(r["cpu_seconds"]["train"] for r in rows if "cpu_seconds" in r)
    evals = sum(r["cpu_seconds"].get("eval", 0.0) for r in rows if "cpu_seconds" in r)
    cpu = f"runs trained {train / 60:.1f} CPU-minutes, evaluated {evals / 60:.1f}"
    if start_dir is not None:
        cpu = f"start trained {_train_cpu(start_dir):.0f} CPU-seconds; " + cpu
    return f"From the records: {', '.join(parts)}; {cpu}."


def figures(name: str, out: Path) -> str:
    """The README block of comparison ``name`` (``CONFIG`` or ``CONFIG@TAG``) rebuilt from the records under
    ``out``."""
    comparison, _ = load_comparison(name.partition("@")[0])
    label, baseline, start_dir = _start(out, comparison)
    rows = comparison_rows(out, label, baseline, comparison)
    _, table = comparison_tables(rows, comparison)
    return table + "\n\n" + _depends_on(rows, start_dir) + "\n"


def regenerate(readme: str, sources: dict[str, Path]) -> str:
    """``readme`` with every named block replaced; a source without its block is an error."""
    found = {m.group("name") for m in BLOCK.finditer(readme)}
    missing = sorted(set(sources) - found)
    if missing:
        raise InputError(f"the README has no block for {missing}; add '<!-- readme_figures: NAME -->' ... "
                         "'<!-- /readme_figures -->' around its table")

    def replace(match: re.Match) -> str:
        name = match.group("name")
        if name not in sources:
            return match.group(0)
        return match.group(1) + figures(name, sources[name]) + match.group(4)

    return BLOCK.sub(replace, readme)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("readme", type=Path)
    p.add_argument("sources", nargs="+", metavar="CONFIG=DIR")
    p.add_argument("--check", action="store_true", help="exit 1 if the README differs from the records")
    args = p.parse_args(argv)
    return run_cli("readme_figures", lambda: _regenerate(args))


def _regenerate(args) -> int:
    sources = dict((k, Path(v)) for k, _, v in (s.partition("=") for s in args.sources))
    try:
        before = args.readme.read_text()
    except OSError as exc:
        raise InputError(f"cannot read {args.readme}: {exc.strerror}") from None
    after = regenerate(before, sources)
    changed = after != before
    if not args.check and changed:
        args.readme.write_text(after)
    print(json.dumps({"readme": str(args.readme), "blocks": sorted(sources), "changed": changed,
                      "check": args.check}))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
