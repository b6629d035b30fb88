"""Time ``dare-leaderboard build`` on a large synthetic result set and print the figures as JSON.

    python benchmarks/leaderboard_build.py                 # 500 runs x 1319 samples (about 380 MB of runs)
    python benchmarks/leaderboard_build.py --runs 50 --keep /tmp/lb

The runs come from the test fixture generator (tests/leaderboards/leaderboard_fixtures.py): real
RunRecord files and samples.jsonl with 1% infrastructure errors, 10 decodings per model, every fifth
model trained. ``page_open_bytes`` is what a browser loads to show the table (index.html, data/index.js
and the assets); samples, run details and paired statistics load on demand.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "leaderboards"))

from leaderboard_fixtures import build_many_fixture  # noqa: E402  (importable only after the sys.path line)

from dare.leaderboards.build import build_site  # noqa: E402  (below the sys.path set-up, in isort order)


def page_open_bytes(site: Path) -> int:
    files = [site / "index.html", site / "data" / "index.js", *(site / "assets").iterdir()]
    return sum(f.stat().st_size for f in files)


def measure(root: Path, n_runs: int, n_samples: int) -> dict:
    started = time.perf_counter()
    build_many_fixture(root / "runs", n_runs, n_samples)
    generated = time.perf_counter() - started
    report = build_site([root / "runs"], root / "site")
    site_bytes = sum(f.stat().st_size for f in (root / "site").rglob("*") if f.is_file())
    runs_bytes = sum(f.stat().st_size for f in (root / "runs").rglob("*") if f.is_file())
    return {"runs": n_runs, "samples_per_run": n_samples, "rows": sum(report.suites.values()),
            "generate_seconds": round(generated, 2), "build_seconds": round(report.seconds, 2),
            "index_js_bytes": (root / "site" / "data" / "index.js").stat().st_size,
            "page_open_bytes": page_open_bytes(root / "site"), "site_bytes": site_bytes, "runs_bytes": runs_bytes,
            "build_seconds_per_run": round(report.seconds / n_runs, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--samples", type=int, default=1319)
    parser.add_argument("--keep", type=Path, help="write runs and site here and keep them (default: a temp dir)")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="dare-leaderboard-bench-"))
    try:
        print(json.dumps(measure(root, args.runs, args.samples)))  # one line, as every benchmark prints
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
