"""How memory and time grow with a run's size: replay evaluations, leaderboard builds, the verdict cache.

    python benchmarks/scale.py            # 1k, 10k, 100k samples; 10, 100, 1000 runs; 1M verdicts
    python benchmarks/scale.py --samples 100 1000 --runs 10 --verdicts 10000 --svg /tmp/scale.svg
    python benchmarks/scale.py --only leaderboard --json F/scale.json --svg F/scale.svg  # F: docs/figures/scale

- replay: ``dare-eval --backend replay`` over a generated long-addition set of N samples (the shipped
  generator's rows and gold completions, one run per size in a fresh process), peak RSS of that process
  (the kernel's ``ru_maxrss``) and wall time; the data file stands in for a shipped one (its own data
  directory and manifest), so nothing but the data differs from a real run.
- leaderboard: ``build_site`` over N generated run records (tests/leaderboards/leaderboard_fixtures.py),
  seconds per record.
- verdict cache: a JSONL cache of N verdicts written in the runner's chunks, then loaded and read in a
  fresh process: seconds and peak RSS.

Prints one JSON object (the last line); ``--svg`` draws the per-size ratios. ``--only`` measures some
parts; with ``--json`` the others are taken from that file (an earlier report), and the merged report is
written back to it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARK = "scale_addition"
PARTS = ("replay", "leaderboard", "verdict_cache")


def _child(argv: list[str]) -> tuple[float, float]:
    """Run ``python scale.py argv`` and return (seconds, peak RSS in MiB) of that process."""
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, *argv], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"scale.py {' '.join(argv)} failed with exit code {proc.returncode}")
    return time.perf_counter() - began, usage.ru_maxrss / 1024


def _replay_setup(root: Path, n: int) -> None:
    from dare.harness.data import DATA_DIR, file_sha256
    from dare.harness.generators.long_addition import file_text, gold_completion, make_rows

    rows = make_rows(seed=n, test_rows=n, train_rows=0)["test"]
    data = root / "data"
    data.mkdir(parents=True)
    (data / f"{BENCHMARK}.jsonl").write_text(file_text(rows))
    manifest = (DATA_DIR / "MANIFEST.sha256").read_text()
    (data / "MANIFEST.sha256").write_text(manifest + f"{file_sha256(data / f'{BENCHMARK}.jsonl')}  {BENCHMARK}.jsonl\n")
    configs = root / "configs" / "benchmarks"
    configs.mkdir(parents=True)
    (configs / f"{BENCHMARK}.yaml").write_text(
        f"name: {BENCHMARK}\nversion: '1'\ndataset_version: 'generated'\nfamily: planning\ndata: {BENCHMARK}.jsonl\n"
        "prompt: dare_long_addition\nverifier: long_addition\nmetrics: [accuracy, partial_credit]\n")
    with open(root / "completions.jsonl", "w") as f:
        for i, row in enumerate(rows):  # every tenth answer wrong, so both verdicts occur
            text = gold_completion(row["a"], row["b"]) if i % 10 else "<answer>0</answer>"
            f.write(json.dumps({"id": row["id"], "completion": text}) + "\n")


def _replay_run(root: Path) -> None:
    """In the child: dare-eval over the generated set, its data directory standing in for the shipped one."""
    os.environ["DARE_CONFIG_PATH"] = str(root / "configs")
    from dare.harness import data
    from dare.harness.cli import main

    data.DATA_DIR = root / "data"
    code = main(["--backend", "replay", "--completions", str(root / "completions.jsonl"), "--suite", BENCHMARK,
                 "--out", str(root / "runs"), "--no-progress"])
    raise SystemExit(code)


def replay(n: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="dare-scale-"))
    try:
        _replay_setup(root, n)
        seconds, peak = _child(["--child-replay", str(root)])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"samples": n, "seconds": round(seconds, 2), "peak_rss_mib": round(peak, 1),
            "ms_per_sample": round(1000 * seconds / n, 3)}


def leaderboard(n: int, samples: int) -> dict:
    sys.path.insert(0, str(REPO / "tests" / "leaderboards"))
    from leaderboard_fixtures import build_many_fixture

    from dare.leaderboards.build import build_site

    root = Path(tempfile.mkdtemp(prefix="dare-scale-lb-"))
    try:
        build_many_fixture(root / "runs", n, samples)
        began = time.perf_counter()
        build_site([root / "runs"], root / "site")
        seconds = time.perf_counter() - began
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"records": n, "seconds": round(seconds, 2), "ms_per_record": round(1000 * seconds / n, 2)}


def _verdicts_write(path: Path, n: int) -> None:
    from dare.harness.cache import JsonlCache, cache_key
    from dare.harness.records import Verdict

    cache, chunk = JsonlCache(path, Verdict), 64  # the runner appends 64 verdicts at a time
    for start in range(0, n, chunk):
        cache.extend((cache_key("v", i), Verdict(score=float(i % 2), passed=bool(i % 2), answer=str(i),
                                                  details={"extraction": "answer_tag"}))
                     for i in range(start, min(n, start + chunk)))


def _verdicts_read(path: Path, n: int) -> None:
    from dare.harness.cache import JsonlCache, cache_key
    from dare.harness.records import Verdict

    cache = JsonlCache(path, Verdict)
    assert len(cache) == n and all(cache.get(cache_key("v", i)) is not None for i in range(n))


def verdict_cache(n: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="dare-scale-vc-"))
    try:
        path = root / "verdicts.jsonl"
        write_s, _ = _child(["--child-verdicts", "write", str(path), str(n)])
        size = path.stat().st_size
        read_s, peak = _child(["--child-verdicts", "read", str(path), str(n)])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"entries": n, "write_seconds": round(write_s, 2), "load_and_read_seconds": round(read_s, 2),
            "load_peak_rss_mib": round(peak, 1), "file_mib": round(size / 2**20, 1)}


def svg(report: dict) -> str:
    """Two panels by hand (no chart library here): replay peak RSS and ms per sample, leaderboard ms per
    record, each relative to its smallest size, on a log-scaled size axis."""
    panels = [("replay evaluation", "samples", [(r["samples"], r["peak_rss_mib"], r["ms_per_sample"])
                                                 for r in report["replay"]], ("peak RSS", "ms per sample")),
              ("leaderboard build", "records", [(r["records"], None, r["ms_per_record"])
                                                for r in report["leaderboard"]], (None, "ms per record"))]
    width, height, pad = 320, 200, 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * width}" height="{height}" '
             'font-family="sans-serif" font-size="11">']
    for p, (title, unit, rows, names) in enumerate(panels):
        x0 = p * width
        parts.append(f'<text x="{x0 + pad}" y="16" font-weight="bold">{title}: each value / its smallest size</text>')
        parts.append(f'<line x1="{x0 + pad}" y1="{height - pad}" x2="{x0 + width - 10}" y2="{height - pad}" '
                     'stroke="#444"/>')
        ratios = [row[c] / rows[0][c] for c in (1, 2) if rows and rows[0][c] for row in rows]
        top = float(max(3, math.ceil(max(ratios, default=1))))  # y axis 0..top x
        parts.append(f'<line x1="{x0 + pad}" y1="30" x2="{x0 + pad}" y2="{height - pad}" stroke="#444"/>')
        for tick in range(1, int(top) + 1):
            y = height - pad - (height - pad - 30) * tick / top
            parts.append(f'<text x="{x0 + 8}" y="{y + 4:.0f}">{tick}x</text>'
                         f'<line x1="{x0 + pad}" y1="{y:.0f}" x2="{x0 + width - 10}" y2="{y:.0f}" stroke="#ddd"/>')
        if len(rows) < 2:
            continue
        lo, hi = math.log10(rows[0][0]), math.log10(rows[-1][0])
        for column, color in ((1, "#1c7ed6"), (2, "#d9480f")):
            if rows[0][column] is None:
                continue
            coords = []
            for size, *values in rows:
                x = x0 + pad + (width - pad - 20) * (math.log10(size) - lo) / (hi - lo)
                ratio = values[column - 1] / rows[0][column]
                coords.append(f"{x:.0f},{height - pad - (height - pad - 30) * ratio / top:.0f}")
            parts.append(f'<polyline points="{" ".join(coords)}" fill="none" stroke="{color}" stroke-width="2"/>')
            label_y = 30 + 14 * column
            parts.append(f'<text x="{x0 + width - 120}" y="{label_y}" fill="{color}">{names[column - 1]}</text>')
        for size, *_ in rows:
            x = x0 + pad + (width - pad - 20) * (math.log10(size) - lo) / (hi - lo)
            parts.append(f'<text x="{x - 12:.0f}" y="{height - pad + 14}">{size:,}</text>')
        parts.append(f'<text x="{x0 + width / 2 - 20:.0f}" y="{height - 8}">{unit}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, nargs="+", default=[10, 100, 1_000])
    parser.add_argument("--run-samples", type=int, default=20, help="samples per generated run record")
    parser.add_argument("--verdicts", type=int, default=1_000_000)
    parser.add_argument("--svg", type=Path, help="write the figure here")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="measure these parts only")
    parser.add_argument("--json", type=Path, help="an earlier report: parts not measured come from it, and the "
                                                  "merged report is written back")
    parser.add_argument("--child-replay", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-verdicts", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_replay:
        _replay_run(args.child_replay)
    if args.child_verdicts:
        action, path, n = args.child_verdicts
        (_verdicts_write if action == "write" else _verdicts_read)(Path(path), int(n))
        return 0
    measure = {"replay": lambda: [replay(n) for n in args.samples],
               "leaderboard": lambda: [leaderboard(n, args.run_samples) for n in args.runs],
               "verdict_cache": lambda: verdict_cache(args.verdicts)}
    report: dict = json.loads(args.json.read_text()) if args.json and args.json.exists() else {}
    missing = [part for part in PARTS if part not in args.only and part not in report]
    if missing:
        raise SystemExit(f"--only leaves out {', '.join(missing)}: pass --json with an earlier report that has them")
    report.update({part: measure[part]() for part in args.only})
    first, last = report["replay"][0], report["replay"][-1]
    report["replay_peak_rss_ratio"] = round(last["peak_rss_mib"] / first["peak_rss_mib"], 3)
    per = [r["ms_per_record"] for r in report["leaderboard"]]
    report["leaderboard_ms_per_record_ratio"] = round(per[-1] / per[0], 3)
    if args.svg:
        args.svg.write_text(svg(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report))  # one line, as every benchmark prints
    return 0


if __name__ == "__main__":
    sys.exit(main())
