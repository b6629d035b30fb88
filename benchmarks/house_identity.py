#!/usr/bin/env python3
"""Before/after identity check for a behaviour-preserving restructuring of DARE.

Runs DARE only through its stable command line (the ``dare-eval`` / ``dare-train`` console scripts next to
``sys.executable``, else ``python -m dare.harness.cli`` / ``-m dare.trainers.cli``), so the same script runs
unchanged on a restructured tree, and writes one JSON of fingerprints:

    python benchmarks/house_identity.py --out house.json [--work DIR] [--only sudoku,dryrun,...]
    python benchmarks/house_identity.py --compare benchmarks/house_identity_3e1baa9.json house.json

Sections (``--only`` takes a comma-separated subset):

``sudoku``   full Sudoku evals of the shipped trained ``tiny-sdar`` and ``tiny-llada`` (500 puzzles each):
             samples.jsonl hash (timing keys removed), metrics, config hash, run directory name (timestamp
             removed), the normalised run.json, and the content-addressed cache entries under OUT/.cache
             (sorted relative paths, plus a hash of each cache file's entries sorted by key, timing removed).
``dryrun``   ``--dry-run`` plans (decoder, options, decoding and its hash, generation key, data hash, ...):
             the full stdout with paths normalised.
``limited``  ``--limit 8`` Sudoku evals over decoders and Fast-dLLM caches: hash of the generated token ids
             (from the generation cache), NFE per sample, samples.jsonl hash, metrics, normalised run.json.
``train``    a 5-step SFT run (tiny-sdar) and a 2-step d1 run (tiny-llada, evaluated on 8 puzzles): sha256 of
             every tensor of the final checkpoint's safetensors (and of trainer_state.pt's tensors), the
             logged per-step metrics (timing removed), the normalised train_config.json and the d1 run's
             evaluation record.
``replay``   ``--backend replay`` HumanEval on 3 fixed completions (code verifier, ``--unsafe-local-exec``
             where no bubblewrap is installed): samples hash, metrics, normalised run.json.

Removed before hashing/recording, because they differ run to run or machine to machine and carry no
behaviour:
  * timing keys, anywhere in samples.jsonl / cache entries / metrics.jsonl / run.json: any key named
    in TIMING_KEYS (``latency_s``, ``cpu_s``, ``time``, ``timing``, ``created_at``, ``finished_at``,
    ``ref_times``: the code verifier's measured reference run times in OUT/.cache/code-plans, ...)
    or ending in ``_s`` / ``_ms`` / ``_seconds`` (at 3e1baa9: ``latency_s`` in generation cache entries,
    ``cpu_s`` and ``time`` in metrics.jsonl, ``timing``/``created_at``/``finished_at`` in run.json;
    samples.jsonl has none; the keys actually dropped are listed in each fingerprint as ``*_dropped_keys``),
    and the top-level ``sha256`` of the code-plan cache files (a checksum over those measured times);
  * run.json ``run_id``, ``environment``, ``command`` (ids, host, versions, argv with temp paths);
  * path-valued keys (PATH_KEYS: ``path``, ``run_dir``, ``checkpoint``, ``base_model_path``,
    ``completions_file``, ``model_path``), and every remaining occurrence of the scratch directory or the
    repository root in strings is replaced by ``<WORK>`` / ``<REPO>``;
  * the replay run's ``isolation`` block (sandbox uids, worker count, interpreter path: host facts).
``_meta`` (commit, versions, CPU capability, per-case wall time) is recorded but not compared; the
fingerprints are only comparable on the same machine class (same torch build and CPU kernels).
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from house_fingerprints import (  # its sibling: benchmarks/ is sys.path[0]
    Ctx,
    cli_command,
    compare,
    eval_fingerprint,
    generation_tokens,
    read_jsonl,
    run_dir_from,
    run_json_fingerprint,
    samples_fingerprint,
    sha,
    state_hashes,
    stdout_lines,
    strip,
    tensor_hashes,
)

SECTIONS = ("sudoku", "dryrun", "limited", "train", "replay")
THREADS = ["--set", "engine.threads=1"]

# name -> (dare-eval arguments); all on sudoku, printed plan only.
DRYRUN_CASES = {
    "tiny-sdar_dynamic_t0.9": ["--model", "tiny-sdar", "--set", "threshold=0.9",
                               "--set", "remasking=low_confidence_dynamic"],
    "tiny-llada_klass_kl0.01": ["--model", "tiny-llada", "--set", "remasking=klass",
                                "--set", 'extra={"klass_kl_threshold": 0.01}'],
    "tiny-llada_fastdllm_dual_t0.9": ["--model", "tiny-llada", "--backend", "fastdllm", "--set", "cache=dual",
                                      "--set", "threshold=0.9"],
    "tiny-dream_entropy": ["--model", "tiny-dream", "--set", "remasking=entropy"],
    "tiny-llada_pc_sampler": ["--model", "tiny-llada", "--set", "remasking=pc_sampler"],
    "tiny-llada_dpad": ["--model", "tiny-llada", "--set", "remasking=dpad"],
    "tiny-sdar_default": ["--model", "tiny-sdar"],
    "tiny-llada_default": ["--model", "tiny-llada"],
    "tiny-llada2_default": ["--model", "tiny-llada2"],
    "tiny-llada2_editing": ["--model", "tiny-llada2", "--set", "remasking=editing"],
    "tiny-sdar_bf16_limit20": ["--model", "tiny-sdar", "--set", "engine.dtype=bfloat16", "--limit", "20"],
}

# name -> (dare-eval arguments); each runs on the first 8 Sudoku puzzles.
LIMITED_CASES = {
    "tiny-llada_low_confidence": ["--model", "tiny-llada", "--set", "remasking=low_confidence"],
    "tiny-llada_random_T0.7": ["--model", "tiny-llada", "--set", "remasking=random", "--set", "temperature=0.7"],
    "tiny-llada_pc_sampler": ["--model", "tiny-llada", "--set", "remasking=pc_sampler"],
    "tiny-llada_klass": ["--model", "tiny-llada", "--set", "remasking=klass"],
    "tiny-llada_dpad": ["--model", "tiny-llada", "--set", "remasking=dpad"],
    "tiny-llada_blocks8": ["--model", "tiny-llada", "--set", "block_length=8"],
    "tiny-llada_fastdllm_prefix": ["--model", "tiny-llada", "--backend", "fastdllm", "--set", "cache=prefix",
                                   "--set", "block_length=8"],
    "tiny-llada_fastdllm_dual": ["--model", "tiny-llada", "--backend", "fastdllm", "--set", "cache=dual",
                                 "--set", "block_length=8"],
    "tiny-llada_fastdllm_dual_t0.9": ["--model", "tiny-llada", "--backend", "fastdllm", "--set", "cache=dual",
                                      "--set", "threshold=0.9", "--set", "block_length=8"],
    "tiny-llada_fastdllm_dkv": ["--model", "tiny-llada", "--backend", "fastdllm", "--set", "cache=dkv",
                                "--set", "block_length=8"],
    "tiny-llada_fastdllm_dual_pc_sampler": ["--model", "tiny-llada", "--backend", "fastdllm", "--set", "cache=dual",
                                            "--set", "remasking=pc_sampler", "--set", "block_length=8"],
    "tiny-sdar_dynamic_t0.9": ["--model", "tiny-sdar", "--set", "remasking=low_confidence_dynamic",
                               "--set", "threshold=0.9"],
    "tiny-sdar_sequential": ["--model", "tiny-sdar", "--set", "remasking=sequential"],
    "tiny-sdar_static_T0.7": ["--model", "tiny-sdar", "--set", "temperature=0.7"],
    "tiny-dream_entropy": ["--model", "tiny-dream", "--set", "remasking=entropy"],
    "tiny-dream_origin": ["--model", "tiny-dream", "--set", "remasking=origin"],
    "tiny-llada2_default": ["--model", "tiny-llada2"],
    "tiny-llada2_editing": ["--model", "tiny-llada2", "--set", "remasking=editing"],
    "tiny-sdar-moe_default": ["--model", "tiny-sdar-moe"],
}

# Three fixed completions for the replay section: right, wrong, right (function only).
REPLAY_COMPLETIONS = [
    {"id": "HumanEval/0", "completion": "```python\nfrom typing import List\n\n\ndef has_close_elements("
     "numbers: List[float], threshold: float) -> bool:\n    for i, a in enumerate(numbers):\n        for j, b in "
     "enumerate(numbers):\n            if i != j and abs(a - b) < threshold:\n                return True\n"
     "    return False\n```"},
    {"id": "HumanEval/1", "completion": "```python\nfrom typing import List\n\n\ndef separate_paren_groups("
     "paren_string: str) -> List[str]:\n    return []\n```"},
    {"id": "HumanEval/2", "completion": "```python\ndef truncate_number(number: float) -> float:\n"
     "    return number % 1.0\n```"},
]

TRAIN_CASES = {
    # SFT (block diffusion) from the shipped tiny-sdar, 5 steps of 4 prompts, no post-training evaluation.
    "sft_tiny-sdar_5steps": ["--config", "tiny_sdar_sudoku_sft", "--model", "tiny-sdar", "--steps", "5",
                             "--set", "prompts_per_step=4", "--set", "micro_batch_size=4", "--set", "save_every=5",
                             "--no-eval"],
    # d1 (the tiny_sudoku_d1 recipe: d1_dare) from the shipped tiny-llada, 2 steps; hot, 8-step rollouts so the
    # rewards differ within a group (a trained model at the recipe's rollout settings gets reward 1 everywhere,
    # advantage 0, no update); the final checkpoint is evaluated on 8 puzzles.
    "d1_tiny-llada_2steps": ["--config", "tiny_sudoku_d1", "--model", "tiny-llada", "--steps", "2",
                             "--set", "rollout.temperature=2.0", "--set", "rollout.steps=8", "--eval-limit", "8"],
}




def section_sudoku(ctx: Ctx) -> dict:
    res = {}
    for model in ("tiny-sdar", "tiny-llada"):
        out = ctx.work / "sudoku" / model
        shutil.rmtree(out, ignore_errors=True)
        proc = ctx.run(f"sudoku/{model}", "dare-eval",
                       ["--model", model, "--suite", "sudoku", "--out", str(out), "--no-progress", *THREADS])
        fp = eval_fingerprint(proc, out, ctx, tokens=True)
        if fp.get("rc") == 0:
            rj = fp["run_json"]
            fp["decoder"] = rj.get("decoder")
            fp["decoding"] = rj.get("decoding")
            fp["decoding_fields"] = rj.get("decoding_fields")
            fp["engine_identity"] = rj.get("engine_identity")
            fp["backend"] = rj.get("backend")
        res[model] = fp
    return res


def section_dryrun(ctx: Ctx) -> dict:
    res = {}
    for name, args in DRYRUN_CASES.items():
        out = ctx.work / "dryrun" / name
        proc = ctx.run(f"dryrun/{name}", "dare-eval",
                       [*args, "--suite", "sudoku", "--out", str(out), "--no-progress", "--dry-run", *THREADS])
        if proc.returncode != 0:
            res[name] = ctx.error_record(proc)
            continue
        lines = [ctx.norm_str(ln) for ln in proc.stdout.splitlines()]
        hashes = [m.group(1) for ln in lines for m in [re.search(r"config_hash (\w+)", ln)] if m]
        res[name] = {"rc": 0, "stdout": lines, "config_hash": hashes[0] if hashes else None,
                     "wrote_files": out.exists() and any(out.rglob("*"))}
    return res


def section_limited(ctx: Ctx) -> dict:
    res = {}
    for name, args in LIMITED_CASES.items():
        out = ctx.work / "limited" / name
        shutil.rmtree(out, ignore_errors=True)
        proc = ctx.run(f"limited/{name}", "dare-eval",
                       [*args, "--suite", "sudoku", "--limit", "8", "--out", str(out), "--no-progress", *THREADS])
        res[name] = eval_fingerprint(proc, out, ctx, tokens=True)
    return res


def section_train(ctx: Ctx) -> dict:
    res = {}
    for name, args in TRAIN_CASES.items():
        out = ctx.work / "train" / name
        shutil.rmtree(out, ignore_errors=True)
        proc = ctx.run(f"train/{name}", "dare-train",
                       [*args, "--out", str(out), "--no-progress", "--set", "threads=1"], timeout=1200)
        if proc.returncode != 0:
            res[name] = ctx.error_record(proc)
            continue
        run_dir = run_dir_from(proc)
        if run_dir is None:
            res[name] = {"rc": 0, "error": "no run directory on the last stdout line"}
            continue
        fp: dict = {"rc": 0, "run_dir_name": run_dir.name}
        dropped: set[str] = set()
        fp["metrics_log"] = [strip(r, ctx, dropped) for r in read_jsonl(run_dir / "metrics.jsonl")]
        fp["losses"] = [r.get("loss") for r in fp["metrics_log"]]
        fp["metrics_dropped_keys"] = sorted(dropped)
        if (run_dir / "train_config.json").exists():
            fp["train_config"] = strip(json.loads((run_dir / "train_config.json").read_text()), ctx, set())
        ckpts = sorted((run_dir / "checkpoints").glob("step-*"), key=lambda p: int(re.sub(r"\D", "", p.name)))
        fp["checkpoints"] = [p.name for p in ckpts]
        if ckpts:
            final = ckpts[-1]
            fp["final_checkpoint_files"] = sorted(p.relative_to(final).as_posix() for p in final.rglob("*")
                                                  if p.is_file())
            fp["weights"] = {p.name: tensor_hashes(p) for p in sorted(final.glob("*.safetensors"))}
            for aux in ("config.json", "tokenizer.json", "tokenizer_config.json"):
                if (final / aux).exists():
                    fp.setdefault("checkpoint_files_sha256", {})[aux] = sha((final / aux).read_bytes())
            if (final / "trainer_state.pt").exists():
                fp["trainer_state"] = state_hashes(final / "trainer_state.pt")
        evals = sorted((run_dir / "eval").glob("*/run.json")) if (run_dir / "eval").is_dir() else []
        if evals:
            eval_dir = evals[-1].parent
            sfp, rows = samples_fingerprint(eval_dir / "samples.jsonl", ctx)
            fp["eval"] = {**sfp, **run_json_fingerprint(eval_dir, ctx), "nfe": [r.get("nfe") for r in rows]}
            if (run_dir / "eval" / ".cache").is_dir():
                fp["eval"].update(generation_tokens(run_dir / "eval" / ".cache"))
        fp["stdout_tail"] = stdout_lines(proc, ctx)
        res[name] = fp
    return res


def section_replay(ctx: Ctx) -> dict:
    out = ctx.work / "replay"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    comp = out / "completions.jsonl"
    comp.write_text("".join(json.dumps(r) + "\n" for r in REPLAY_COMPLETIONS))
    args = ["--backend", "replay", "--suite", "humaneval", "--completions", str(comp), "--limit", "3",
            "--out", str(out), "--no-progress"]
    if not shutil.which("bwrap"):
        args.append("--unsafe-local-exec")
    proc = ctx.run("replay/humaneval", "dare-eval", args)
    fp = eval_fingerprint(proc, out, ctx, tokens=False, extra_drop={"isolation"})
    if fp.get("rc") == 0:  # the flag list names --unsafe-local-exec only where no sandbox exists
        fp["run_json"]["flags"] = [f for f in fp["run_json"].get("flags", []) if f != "unsafe-local-exec"]
        for bench in fp["run_json"].get("benchmarks", {}).values():
            bench.get("verifier_options", {}).pop("unsafe_local_exec", None)
    return {"humaneval_3": fp}


SECTION_FUNCS = {"sudoku": section_sudoku, "dryrun": section_dryrun, "limited": section_limited,
                 "train": section_train, "replay": section_replay}


# ------------------------------------------------------------------------------------------------ fixtures

def write_fixtures(ctx: Ctx, dest: Path, trim: int = 20) -> list[Path]:
    """Copy old-release records (run.json + samples.jsonl trimmed, training records) for migration tests."""
    written = []

    def copy(src: Path, dst: Path):
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.name.endswith(".jsonl"):
            lines = src.read_text().splitlines(keepends=True)[:trim]
            for line in lines:
                json.loads(line)
            dst.write_text("".join(lines))
        else:
            shutil.copyfile(src, dst)
        written.append(dst)

    def last_run(out: Path) -> Path | None:
        runs = sorted(p.parent for p in out.glob("*/run.json"))
        return runs[-1] if runs else None

    for name, out in (("eval_sudoku_tiny-sdar", ctx.work / "sudoku" / "tiny-sdar"),
                      ("replay_humaneval", ctx.work / "replay")):
        run = last_run(out)
        if run is None:
            print(f"fixtures: no run under {out}", file=sys.stderr)
            continue
        for f in ("run.json", "samples.jsonl"):
            copy(run / f, dest / name / f)
        if name == "replay_humaneval":
            copy(out / "completions.jsonl", dest / name / "completions.jsonl")
    for name, out in (("train_d1_tiny-llada", ctx.work / "train" / "d1_tiny-llada_2steps"),
                      ("train_sft_tiny-sdar", ctx.work / "train" / "sft_tiny-sdar_5steps")):
        runs = [p for p in out.iterdir() if p.is_dir()] if out.is_dir() else []
        if not runs:
            print(f"fixtures: no training run under {out}", file=sys.stderr)
            continue
        run = runs[0]
        for p in sorted(run.rglob("*")):
            rel = p.relative_to(run)
            if not p.is_file() or rel.parts[0] in ("checkpoints",) or any(part.startswith(".") for part in rel.parts):
                continue
            copy(p, dest / name / rel)
    return written


# ------------------------------------------------------------------------------------------------- compare

def _meta(ctx: Ctx, sections: list[str], wall: float) -> dict:
    meta: dict = {"sections": sections, "wall_s_total": round(wall, 1), "case_wall_s": ctx.timings,
                  "python": platform.python_version(), "platform": platform.platform(),
                  "dare_eval": " ".join(cli_command("dare-eval")).replace(sys.prefix, "<PREFIX>")}
    try:
        meta["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ctx.repo, capture_output=True,
                                            text=True).stdout.strip()
        meta["git_dirty"] = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                                cwd=ctx.repo, capture_output=True, text=True).stdout.strip())
    except OSError:
        pass
    try:
        import torch

        meta["torch"] = torch.__version__
        meta["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001
        pass
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the fingerprint JSON here (it is printed too)")
    ap.add_argument("--work", help="scratch directory (default: a new temporary one, removed at the end)")
    ap.add_argument("--only", help=f"comma-separated sections: {', '.join(SECTIONS)}")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                    help="print every differing key; exit 1 if any differ")
    ap.add_argument("--fixtures", help="also copy old-release run records (sudoku, replay, training) into this "
                                       "directory, samples trimmed to 20 lines")
    ap.add_argument("--quiet", action="store_true", help="do not print the JSON")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    sections = [s.strip() for s in args.only.split(",")] if args.only else list(SECTIONS)
    bad = [s for s in sections if s not in SECTION_FUNCS]
    if bad:
        ap.error(f"unknown section(s) {bad}; choose from {', '.join(SECTIONS)}")
    repo = Path(__file__).resolve().parent.parent
    tmp = None
    if args.work:
        work = Path(args.work).absolute()
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="dare-house-")
        work = Path(tmp)
    ctx = Ctx(work, repo)
    t0 = time.monotonic()
    result: dict = {}
    try:
        for s in sections:
            print(f"[{s}]", file=sys.stderr, flush=True)
            result[s] = SECTION_FUNCS[s](ctx)
        result["_meta"] = _meta(ctx, sections, time.monotonic() - t0)
        text = json.dumps(result, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        if args.out:
            Path(args.out).write_text(text)
        if not args.quiet:
            sys.stdout.write(text)
        if args.fixtures:
            for p in write_fixtures(ctx, Path(args.fixtures)):
                print(f"fixture {p}", file=sys.stderr)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
