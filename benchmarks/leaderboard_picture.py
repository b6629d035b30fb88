"""The README's leaderboard picture, from real run records made at a clean commit.

    python benchmarks/leaderboard_picture.py --run      # (re)make the records; refuses a dirty work tree
    python benchmarks/leaderboard_picture.py            # the picture from the kept records

``--run`` evaluates the shipped tiny models on the first 100 Sudoku test puzzles (each with its own config's
decoding, tiny-sdar also at two tokens a step, tiny-llada also under Fast-dLLM's dual cache), trains tiny-llada
with d1 for a few steps and evaluates it on the same puzzles, and scores the choice tasks by likelihood with
contexts as raw text and in the chat template (the README's table): the dare-eval / dare-train commands in RUNS.
Only what a reader needs to trace a number is kept under ``--records`` (KEEP: run.json, samples.jsonl, a training
run's metrics and config), never caches or checkpoints. The picture is the built leaderboard's Sudoku page with
tiny-llada as the baseline (paired deltas, the trained row's curve), screenshot in headless Chromium. The last
line printed is one JSON object: the picture, its size, the records and the commit they were made at.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from frontier_picture import LAUNCH_ARGS, chromium_path  # benchmarks/ on sys.path when run as a script

from dare.harness.cliutil import run_cli
from dare.harness.errors import InputError
from dare.leaderboards.build import build_site
from dare.leaderboards.loading import load_runs

ROOT = Path(__file__).resolve().parents[1]
SUDOKU = ["--suite", "sudoku", "--limit", "100"]
CHOICE_SDAR = ["--model", "tiny-sdar", "--suite", "sudoku_choice", "--limit", "200", "--set", "likelihood.mode=exact"]
CHOICE_LLADA = ["--model", "tiny-llada", "--suite", "sudoku_choice", "--limit", "200", "--set",
                "likelihood.mc_num=32", "--set", "likelihood.batch=32"]
CHOICE_LONG = ["--model", "tiny-llada-long", "--suite", "long_addition_choice", "--limit", "100", "--set",
               "likelihood.mc_num=32", "--set", "likelihood.batch=32"]
CHAT = ["--set", "choice.chat_template=true"]
#: (folder under --records, command): each writes its run directories into that folder
RUNS = [
    ("sudoku", ["dare-eval", "--model", "tiny-llada", *SUDOKU]),
    ("sudoku", ["dare-eval", "--model", "tiny-sdar", *SUDOKU]),
    ("sudoku", ["dare-eval", "--model", "tiny-sdar", *SUDOKU, "--set", "steps=16"]),
    ("sudoku", ["dare-eval", "--model", "tiny-dream-sudoku", *SUDOKU]),
    ("sudoku", ["dare-eval", "--model", "tiny-llada", *SUDOKU, "--backend", "fastdllm", "--set", "cache=dual",
                "--set", "threshold=0.9"]),
    ("train", ["dare-train", "--algo", "d1", "--model", "tiny-llada", "--suite", "sudoku", "--steps", "6",
               "--eval-limit", "100", "--no-progress"]),
    *(("choice", ["dare-eval", *args, *chat]) for args in (CHOICE_SDAR, CHOICE_LLADA, CHOICE_LONG)
      for chat in ([], CHAT)),
]
KEEP = {"run.json", "samples.jsonl", "metrics.jsonl", "train_config.json", "environment.json", "eval_run.txt",
        "cpu_seconds.json", "rollout.json"}
SKIP_DIRS = {".cache", "checkpoints", "checkpoint", "weights"}


def clean_commit() -> str:
    """HEAD's commit, refusing a work tree with changes (a record's commit must name the code that made it)."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, text=True,
                            capture_output=True, check=True).stdout
    if status.strip():
        raise InputError("the work tree has uncommitted changes; commit or stash them, then rerun --run")
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True, capture_output=True,
                          check=True).stdout.strip()


def keep(scratch: Path, records: Path) -> int:
    """Copy the KEEP files of every run under ``scratch`` to ``records`` (same layout); return how many."""
    kept = 0
    for path in sorted(scratch.rglob("*")):
        rel = path.relative_to(scratch)
        if path.is_file() and path.name in KEEP and not SKIP_DIRS & set(rel.parts):
            (records / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, records / rel)
            kept += 1
    return kept


def make_records(records: Path) -> str:
    commit = clean_commit()
    with tempfile.TemporaryDirectory(prefix="leaderboard-records-") as tmp:
        scratch = Path(tmp)
        for folder, command in RUNS:
            out = scratch / folder
            script = Path(sys.executable).parent / command[0]  # this interpreter's console script
            subprocess.run([str(script), *command[1:], "--out", str(out)], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)
        if records.exists():
            shutil.rmtree(records)
        keep(scratch, records)
    return commit


def screenshot(site: Path, out: Path, width: int) -> int:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto((site / "index.html").resolve().as_uri() + "#suite=sudoku")
            page.wait_for_selector("td.delta")
            page.wait_for_selector("svg.spark")
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
        finally:
            browser.close()
    return out.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=ROOT / "docs" / "figures" / "leaderboard")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "leaderboard.png")
    parser.add_argument("--run", action="store_true", help="make the records first (at a clean commit)")
    parser.add_argument("--width", type=int, default=1500, help="viewport width in CSS pixels")
    args = parser.parse_args(argv)
    return run_cli("leaderboard_picture", lambda: _picture(args))


def _picture(args) -> int:
    if args.run:
        make_records(args.records)
    if not args.records.is_dir():
        raise InputError(f"--records {args.records}: no such directory; run with --run first")
    commits = sorted({run.record.environment.git_commit or "" for run in load_runs([args.records]).runs})
    with tempfile.TemporaryDirectory(prefix="leaderboard-site-") as tmp:
        report = build_site([args.records], Path(tmp) / "site", baseline="tiny-llada",
                            title="DARE leaderboard (shipped tiny models, kept records)")
        size = screenshot(report.out, args.out, args.width)
    print(json.dumps({"picture": str(args.out), "bytes": size, "records": str(args.records),
                      "suites": report.suites, "commits": commits}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
