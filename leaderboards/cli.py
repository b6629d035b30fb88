"""``dare-leaderboard``: build the static HTML leaderboard from run directories.

    dare-leaderboard build --runs runs/ --out site/ [--baseline MODEL] [--title TEXT]

Exit codes (:func:`dare.harness.cliutil.run_cli`): 0 built, 2 user error (no runs, bad --out, unknown
baseline), 1 internal error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from dare.harness.cliutil import Parser, emit, run_cli
from dare.harness.errors import InputError

from .build import build_site
from .statistics import N_BOOT

PROG = "dare-leaderboard"


def build_parser() -> Parser:
    parser = Parser(prog=PROG, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the static site from run directories")
    build.add_argument("--runs", nargs="+", type=Path, required=True, metavar="DIR",
                       help="folders holding run directories (searched recursively for run.json)")
    build.add_argument("--out", type=Path, required=True, metavar="SITE", help="output folder (replaced on rebuild)")
    build.add_argument("--baseline", metavar="MODEL", help="model name or row id shown as the initial baseline")
    build.add_argument("--title", default="DARE leaderboard", help="page title")
    build.add_argument("--bootstrap", type=int, default=N_BOOT, metavar="B",
                       help=f"paired bootstrap resamples (default {N_BOOT})")
    build.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    return run_cli(PROG, lambda: _build(args))


def _build(args: argparse.Namespace) -> int:
    if args.bootstrap < 100:
        raise InputError("--bootstrap must be at least 100")
    report = build_site(args.runs, args.out, baseline=args.baseline, title=args.title, n_boot=args.bootstrap)
    rows = ", ".join(f"{suite}: {n} rows" for suite, n in report.suites.items())
    emit(f"built {report.out / 'index.html'} from {report.runs} runs ({rows}) in {report.seconds:.1f} s; "
         f"index {report.index_bytes / 1e6:.2f} MB"
         + (f"; {len(report.frontiers)} frontier page(s) in {report.out / 'frontier'}" if report.frontiers else ""))
    if report.skipped:
        emit(f"skipped {len(report.skipped)} invalid run record(s); the warnings above name each file", err=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
