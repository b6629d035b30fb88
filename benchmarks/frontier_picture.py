"""The README's frontier picture, rebuilt from run records: leaderboard site -> frontier overview -> PNG.

    python benchmarks/frontier_picture.py [--records docs/figures/frontier] [--out docs/figures/frontier.png]
        [--site DIR] [--width 1120]

Builds the static leaderboard from the records (``dare-leaderboard build``'s engine), opens its frontier
overview (frontier/index.html) in headless Chromium through playwright, as tests/leaderboards does, and
screenshots the page body. Refresh the records first with benchmarks/decode_frontier.py (one ``--out``
folder per model under ``--records``), e.g. after a new decoding strategy is registered; the shipped ones:

    python benchmarks/decode_frontier.py --model tiny-llada --suite sudoku --limit 32 --threads 1 --repeat 3 \
        --out docs/figures/frontier/tiny-llada --json docs/figures/frontier/tiny-llada/frontier.json
    python benchmarks/decode_frontier.py --model tiny-sdar --suite sudoku --limit 32 --threads 1 --repeat 3 \
        --gen-length 64 --block-length 4 --out docs/figures/frontier/tiny-sdar \
        --json docs/figures/frontier/tiny-sdar/frontier.json
    python benchmarks/decode_frontier.py --model tiny-llada-long --suite long_canvas --limit 32 --threads 1 \
        --gen-length 160 --block-length 32 --out docs/figures/frontier/tiny-llada-long \
        --json docs/figures/frontier/tiny-llada-long/frontier.json
    python benchmarks/decode_frontier.py --model tiny-dream-sudoku --suite sudoku --limit 32 --threads 1 --repeat 3 \
        --gen-length 32 --block-length 32 --out docs/figures/frontier/tiny-dream-sudoku \
        --json docs/figures/frontier/tiny-dream-sudoku/frontier.json

(delete the old run directories first: a strategy run twice is shown once, the newest). The last line
printed is one JSON object: the picture, its size, the frontier pages and the machine(s) the records
were measured on, read from their environment (for the README's sentence).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from dare.harness.cliutil import run_cli
from dare.harness.errors import InputError
from dare.leaderboards.build import build_site
from dare.leaderboards.frontier import build_frontiers
from dare.leaderboards.loading import load_runs

MAX_BYTES_PER_PAGE = 100_000  # the README picture stays small: about 100 KB per (model, suite) frontier
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def machines(records: Path) -> list[str]:
    """Every distinct machine line of the frontier points' records (one, when all ran on one machine)."""
    return sorted({f.shared["machine"] for f in build_frontiers(load_runs([records]).runs)})


def chromium_path() -> str:
    """The Chromium binary playwright drives (DARE_CHROMIUM, else chromium on PATH), or a one-line InputError."""
    chromium = os.environ.get("DARE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).is_file():
        raise InputError(f"no Chromium binary at {chromium}; apt-get install chromium or set DARE_CHROMIUM")
    return chromium


def screenshot(page_file: Path, out: Path, width: int) -> int:
    """Render ``page_file`` in Chromium and write its ``main`` element as PNG; return the byte size."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise InputError("playwright is not installed; pip install playwright (the dev extra has it)") from exc
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 800})
            page.goto(page_file.resolve().as_uri())
            page.wait_for_selector("svg.frontier-chart")
            out.parent.mkdir(parents=True, exist_ok=True)
            page.locator("main").screenshot(path=str(out))
        finally:
            browser.close()
    return out.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=Path("docs/figures/frontier"),
                        help="folder holding the frontier run directories (searched recursively)")
    parser.add_argument("--out", type=Path, default=Path("docs/figures/frontier.png"))
    parser.add_argument("--site", type=Path, help="keep the built site here (default: a temporary folder)")
    parser.add_argument("--width", type=int, default=1120, help="viewport width in CSS pixels")
    args = parser.parse_args(argv)
    return run_cli("frontier_picture", lambda: _picture(args))


def _picture(args) -> int:
    if not args.records.is_dir():
        raise InputError(f"--records {args.records}: no such directory; run "
                         f"benchmarks/decode_frontier.py --out {args.records}/<model> first")
    keep = args.site is not None
    site = args.site or Path(tempfile.mkdtemp(prefix="frontier-site-")) / "site"
    try:
        report = build_site([args.records], site, title="DARE frontier records")
        if not report.frontiers:
            raise InputError(f"no frontier in {args.records}: it needs two or more strategies of one model run "
                             "with the same settings; run benchmarks/decode_frontier.py --out there first")
        size = screenshot(report.out / "frontier" / "index.html", args.out, args.width)
        found = machines(args.records)
    finally:
        if not keep:
            shutil.rmtree(site.parent, ignore_errors=True)
    limit = MAX_BYTES_PER_PAGE * len(report.frontiers)
    if size > limit:
        print(f"frontier_picture: warning: {args.out} is {size / 1e3:.0f} KB (over {limit / 1e3:.0f} KB); "
              "pass a smaller --width", file=sys.stderr)
    print(json.dumps({"picture": str(args.out), "bytes": size, "pages": [f["title"] for f in report.frontiers],
                      "machine": found, "site": str(report.out) if keep else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
