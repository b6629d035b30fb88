"""The fingerprints of benchmarks/house_identity.py: what a CLI run leaves behind, with timings, ids and
paths removed (the rules are in that script's docstring), hashed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMING_KEYS = {"latency_s", "cpu_s", "wall_s", "elapsed_s", "time", "timing", "timings", "created_at",
               "finished_at", "timestamp", "started_at", "duration", "duration_s", "ref_times"}
# top-level keys of the .json files under OUT/.cache (code-plans) that are dropped: the plan's self-checksum,
# which covers its measured reference run times (`ref_times`).
CACHE_JSON_DROP = {"sha256"}
TIMING_SUFFIXES = ("_s", "_ms", "_seconds")
RUNJSON_DROP = {"run_id", "environment", "command"}
PATH_KEYS = {"path", "run_dir", "checkpoint", "base_model_path", "completions_file", "model_path"}


# ---------------------------------------------------------------------------------------------- helpers

def cli_command(tool: str) -> list[str]:
    """The console script next to this interpreter, else the module that backs it."""
    script = Path(sys.executable).parent / tool
    if script.exists():
        return [str(script)]
    module = {"dare-eval": "dare.harness.cli", "dare-train": "dare.trainers.cli"}[tool]
    return [sys.executable, "-m", module]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONHASHSEED="0")
    return env


class Ctx:
    def __init__(self, work: Path, repo: Path):
        self.work = work
        self.repo = repo
        self.timings: dict[str, float] = {}

    def norm_str(self, s: str) -> str:
        for root, tag in ((self.work, "<WORK>"), (self.repo, "<REPO>")):
            for form in {str(root), str(root.resolve())}:
                s = s.replace(form, tag)
        s = s.replace(tempfile.gettempdir().rstrip("/") + "/", "<TMP>/")
        return s

    def run(self, name: str, tool: str, args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        proc = subprocess.run([*cli_command(tool), *args], cwd=self.work, env=_env(), capture_output=True, text=True,
                              timeout=timeout)
        self.timings[name] = round(time.monotonic() - t0, 2)
        print(f"  {name}: rc {proc.returncode} in {self.timings[name]} s", file=sys.stderr, flush=True)
        return proc

    def error_record(self, proc: subprocess.CompletedProcess) -> dict:
        lines = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
        return {"rc": proc.returncode, "error": self.norm_str(lines[-1]) if lines else ""}


def _is_timing(key: str) -> bool:
    return key in TIMING_KEYS or key.endswith(TIMING_SUFFIXES)


def strip(obj, ctx: Ctx, dropped: set[str], drop: set[str] = frozenset(), paths: bool = True):
    """Remove timing keys (and `drop` at the top level) recursively, drop path keys, normalise strings."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if _is_timing(k) or k in drop or (paths and k in PATH_KEYS and (v is None or isinstance(v, str))):
                dropped.add(k)
                continue
            out[k] = strip(v, ctx, dropped, paths=paths)
        return out
    if isinstance(obj, list):
        return [strip(v, ctx, dropped, paths=paths) for v in obj]
    if isinstance(obj, str):
        return ctx.norm_str(obj)
    return obj


def canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def read_jsonl(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stdout_lines(proc: subprocess.CompletedProcess, ctx: Ctx) -> list[str]:
    """stdout without its last line (the run directory); JSON lines with their timing keys removed."""
    out = []
    for line in proc.stdout.splitlines()[:-1]:
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        out.append(canon(strip(obj, ctx, set())) if isinstance(obj, dict) else ctx.norm_str(line))
    return out


def run_dir_from(proc: subprocess.CompletedProcess) -> Path | None:
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    return Path(lines[-1]) if lines and Path(lines[-1]).is_dir() else None


def samples_fingerprint(path: Path, ctx: Ctx) -> dict:
    dropped: set[str] = set()
    rows = [strip(r, ctx, dropped, paths=False) for r in read_jsonl(path)]
    return {"samples_sha256": sha("\n".join(canon(r) for r in rows)), "samples_n": len(rows),
            "samples_dropped_keys": sorted(dropped)}, rows


def cache_fingerprint(cache: Path, ctx: Ctx) -> dict:
    entries, contents, dropped = [], {}, set()
    for p in sorted(cache.rglob("*")):
        if p.is_dir() or p.name.endswith(".lock") or p.name.startswith(".") or ".tmp" in p.name:
            continue
        rel = p.relative_to(cache).as_posix()
        entries.append(rel)
        if p.suffix == ".jsonl":
            rows = [strip(r, ctx, dropped, paths=False) for r in read_jsonl(p)]
            rows.sort(key=lambda r: canon(r.get("key", r)))
            contents[rel] = {"n": len(rows), "sha256": sha("\n".join(canon(r) for r in rows))}
        elif p.suffix == ".json":
            doc = strip(json.loads(p.read_text()), ctx, dropped, drop=CACHE_JSON_DROP, paths=False)
            contents[rel] = {"sha256": sha(canon(doc))}
        else:
            contents[rel] = {"bytes_sha256": sha(p.read_bytes())}
    return {"cache_entries": entries, "cache_contents": contents, "cache_dropped_keys": sorted(dropped)}


def generation_tokens(cache: Path) -> dict:
    """Token ids and NFE of every generation under OUT/.cache/generations, in (sample id, index) order."""
    gens = []
    for p in sorted((cache / "generations").rglob("*.jsonl")) if (cache / "generations").is_dir() else []:
        for row in read_jsonl(p):
            v = row.get("value", row)
            gens.append({k: v.get(k) for k in ("sample_id", "index", "token_ids", "nfe", "nfe_official",
                                               "finish_reason", "text")})
    gens.sort(key=lambda g: (str(g["sample_id"]), g["index"] or 0))
    return {"token_ids_sha256": sha(canon([[g["sample_id"], g["index"], g["token_ids"]] for g in gens])),
            "generations_sha256": sha(canon(gens)), "generations_n": len(gens),
            "token_ids_present": all(g["token_ids"] is not None for g in gens) if gens else False}


def run_json_fingerprint(run_dir: Path, ctx: Ctx, extra_drop: set[str] = frozenset()) -> dict:
    dropped: set[str] = set()
    record = json.loads((run_dir / "run.json").read_text())
    return {"run_json": strip(record, ctx, dropped, drop=RUNJSON_DROP | set(extra_drop)),
            "run_json_dropped_keys": sorted(dropped),
            "run_dir_name": re.sub(r"^\d{8}T\d{6}_", "", run_dir.name)}


def eval_fingerprint(proc, out: Path, ctx: Ctx, *, tokens: bool, extra_drop: set[str] = frozenset()) -> dict:
    if proc.returncode != 0:
        return ctx.error_record(proc)
    run_dir = run_dir_from(proc)
    if run_dir is None:
        return {"rc": 0, "error": "no run directory on the last stdout line"}
    fp: dict = {"rc": 0}
    sfp, rows = samples_fingerprint(run_dir / "samples.jsonl", ctx)
    fp.update(sfp)
    fp["nfe"] = [r.get("nfe") for r in rows]
    fp["passed"] = [r.get("passed") for r in rows]
    rj = run_json_fingerprint(run_dir, ctx, extra_drop)
    fp["config_hash"] = rj["run_json"].get("decoding", {}).get("config_hash")
    fp["metrics"] = rj["run_json"].get("metrics")
    fp.update(rj)
    cache = out / ".cache"
    if cache.is_dir():
        fp.update(cache_fingerprint(cache, ctx))
        if tokens:
            fp.update(generation_tokens(cache))
    fp["stdout_tail"] = stdout_lines(proc, ctx)
    return fp


# --------------------------------------------------------------------------------------------- sections

def tensor_hashes(path: Path) -> dict:
    import torch
    from safetensors.torch import load_file

    out = {}
    for name, t in sorted(load_file(str(path)).items()):
        t = t.detach().contiguous().cpu()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        out[name] = f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}:{sha(raw)}"
    return out


def state_hashes(path: Path) -> dict:
    import torch

    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        return {"load_error": f"{type(exc).__name__}: {exc}"[:300]}
    out: dict = {}

    def walk(prefix, obj):
        if isinstance(obj, torch.Tensor):
            t = obj.detach().contiguous().cpu()
            raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            out[prefix] = f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}:{sha(raw)}"
        elif isinstance(obj, dict):
            for k in sorted(obj, key=str):
                walk(f"{prefix}.{k}" if prefix else str(k), obj[k])
        elif isinstance(obj, (list, tuple)):
            for i, v in enumerate(obj):
                walk(f"{prefix}[{i}]", v)
        elif isinstance(obj, (int, float, str, bool)) or obj is None:
            out[prefix] = obj

    walk("", state)
    return {k: v for k, v in out.items() if not any(_is_timing(part.split("[")[0]) for part in k.split("."))}


def flatten(obj, prefix="") -> dict:
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        if not obj:
            out[prefix] = {}
        return out
    if isinstance(obj, list):
        out = {}
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}[{i}]"))
        if not obj:
            out[prefix] = []
        out[f"{prefix}.__len__"] = len(obj)
        return out
    return {prefix: obj}


def compare(a_path: str, b_path: str) -> int:
    a = json.loads(Path(a_path).read_text())
    b = json.loads(Path(b_path).read_text())
    a_sections = {k for k in a if not k.startswith("_")}
    b_sections = {k for k in b if not k.startswith("_")}
    common = a_sections & b_sections
    for only, side in ((a_sections - b_sections, a_path), (b_sections - a_sections, b_path)):
        for s in sorted(only):
            print(f"note: section {s!r} only in {side} (not compared)")
    fa = flatten({k: a[k] for k in common})
    fb = flatten({k: b[k] for k in common})
    missing = object()
    diffs = [k for k in sorted(set(fa) | set(fb)) if fa.get(k, missing) != fb.get(k, missing)]

    def show(v):
        if v is missing:
            return "<absent>"
        s = json.dumps(v, sort_keys=True)
        return s if len(s) <= 200 else s[:197] + "..."

    for k in diffs:
        print(f"DIFF {k}\n  A: {show(fa.get(k, missing))}\n  B: {show(fb.get(k, missing))}")
    ma, mb = a.get("_meta", {}), b.get("_meta", {})
    for key in ("git_commit", "torch", "cpu_capability", "python"):
        if ma.get(key) != mb.get(key):
            print(f"note (not compared): _meta.{key}: {ma.get(key)!r} vs {mb.get(key)!r}")
    print(f"{len(diffs)} differing key(s) in {len(common)} compared section(s): "
          f"{'IDENTICAL' if not diffs else 'DIFFERENT'}")
    return 1 if diffs else 0


# ---------------------------------------------------------------------------------------------------- main
