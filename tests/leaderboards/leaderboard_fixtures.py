"""Synthetic run directories for leaderboard tests and the build benchmark.

Runs are real :class:`RunRecord` objects written with ``to_json()`` next to a samples.jsonl whose
verdicts are drawn per model "skill" and per item difficulty; the metrics in run.json are computed from
those samples (accuracy and a bootstrap 95% interval), so tests can check the site against them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dare.harness.records import (
    BenchmarkInfo,
    ComponentInfo,
    DecodingConfig,
    MetricValue,
    ModelInfo,
    RunRecord,
)

DECODING_A = DecodingConfig(gen_length=256, steps=256, block_length=32)
DECODING_B = DecodingConfig(gen_length=256, steps=128, block_length=32)
DECODING_P = DecodingConfig(gen_length=128, steps=128, block_length=128)
MATH = {"gsm8k": 120, "math500": 80, "aime2024": 30}
PLANNING = {"countdown": 100, "sudoku": 50}
COMPLETION_FILLER = ("Let me work through this step by step. First I note the quantities given in the problem, "
                     "then I combine them carefully, checking each intermediate result before moving on. ")


def read_data(path: Path):
    """The payload of a ``DARE.register(kind, key, payload);`` data file."""
    text = path.read_text(encoding="utf-8")
    start = text.index(", ", text.index(", ") + 1) + 2
    return json.loads(text[start:text.rindex(");")])


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class RunSpec:
    """One synthetic run. ``benchmarks``: name -> number of items; ``skill`` in [0, 1]."""

    run_id: str
    suite: str
    model: str
    benchmarks: dict[str, int]
    skill: float
    decoding: DecodingConfig = DECODING_A
    architecture: str | None = None
    backend: str = "torch"
    training: dict[str, Any] | None = None
    curve: str | None = None  # None, "inline" or "file"
    status: str = "complete"
    used_fraction: float = 1.0
    created_at: str = "2026-11-20T10:00:00Z"
    data_sha_override: dict[str, str] = field(default_factory=dict)
    dataset_versions: dict[str, str] = field(default_factory=dict)  # benchmark -> recorded version (none: an old run)
    extra_fields: dict[str, Any] = field(default_factory=dict)


def item_difficulty(bench: str, n: int) -> np.ndarray:
    return np.random.default_rng(int(sha(bench)[:8], 16)).random(n)


def write_run(root: Path, spec: RunSpec) -> Path:
    """Write ``root/<run_id>/run.json`` + samples.jsonl (+ curve JSONL) and return the run directory."""
    run_dir = root / spec.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(int(sha(spec.run_id)[:8], 16))
    infos, metrics, counts, lines = {}, {}, {}, []
    for bench, n_total in spec.benchmarks.items():
        n_used = max(1, int(n_total * spec.used_fraction))
        difficulty = item_difficulty(bench, n_total)[:n_used]
        passed = rng.random(n_used) < np.clip(spec.skill + (0.5 - difficulty) * 0.8, 0.02, 0.98)
        errors = rng.random(n_used) < 0.01
        scored = passed[~errors].astype(float)
        boot = rng.choice(scored, size=(1000, len(scored))).mean(axis=1)
        metric = {"accuracy": MetricValue(value=float(scored.mean()), ci=tuple(np.quantile(boot, [0.025, 0.975])),
                                          n=len(scored))}
        if bench == "sudoku":
            metric["partial_credit"] = MetricValue(value=float(scored.mean() * 0.5 + 0.4), ci=(0.3, 0.9), n=len(scored))
        metrics[bench] = metric
        counts[bench] = {"scored": len(scored), "error": int(errors.sum()), "unscored": 0,
                         "generated": n_used, "cached": 0}
        template = f"Solve the problem. Put the final answer after ####.\n\n{{question}}  [{bench}]"
        infos[bench] = BenchmarkInfo(
            name=bench, version="1", data_file=f"{bench}.jsonl", dataset_version=spec.dataset_versions.get(bench),
            data_sha256=spec.data_sha_override.get(bench, sha(bench)), n_total=n_total, n_used=n_used,
            prompt_template=template, prompt_template_hash=sha(template)[:16], verifier="math", verifier_version="1")
        for i in range(n_used):
            lines.append(_sample_line(bench, i, bool(passed[i]), bool(errors[i])))
    record = RunRecord(
        run_id=spec.run_id, status=spec.status, created_at=spec.created_at, suite=spec.suite, benchmarks=infos,
        model=ModelInfo(name=spec.model, path=f"/models/{spec.model}", architecture=spec.architecture,
                        fingerprint=sha(spec.model), training=_training(spec, run_dir)),
        backend=ComponentInfo(name=spec.backend, version="0.1"), decoding=spec.decoding, metrics=metrics,
        counts=counts, timing={"total_s": 12.5},
        environment={"python": "3.11.2", "torch": "2.13.0", "platform": "linux", "dare_version": "0.1.0",
                     "git_commit": "17e0fef", "git_dirty": False},
        command=["dare-eval", "--model", spec.model, "--suite", spec.suite])
    data = record.to_json()
    data.update(spec.extra_fields)
    (run_dir / "run.json").write_text(json.dumps(data, indent=1))
    (run_dir / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def _sample_line(bench: str, i: int, passed: bool, error: bool) -> str:
    a, b = 17 + i * 7 % 89, 3 + i * 13 % 41
    gold = str(a + b)
    answer = gold if passed else str(a + b + 1 + i % 5)
    question = (f"Item {i} of {bench}: a shop sells {a} apples in the morning and {b} in the afternoon. "
                f"How many apples does it sell in total?")
    completion = f"{COMPLETION_FILLER}{a} + {b} = {answer}.\n#### {answer}"
    return json.dumps({
        "benchmark": bench, "id": f"{bench}-{i:04d}", "index": 0,
        "messages": [{"role": "user", "content": question}], "reference": gold, "completion": completion,
        "answer": None if error else answer, "passed": passed and not error, "score": float(passed and not error),
        "status": "error" if error else "scored",
        "details": {"error": "verifier timed out"} if error else {"mode": "numeric"},
        "nfe": 256, "finish_reason": "stop"})


def _training(spec: RunSpec, run_dir: Path) -> dict[str, Any] | None:
    if spec.training is None:
        return None
    steps = np.arange(0, 200, 10)
    rng = np.random.default_rng(7)
    curve = [{"step": int(s), "reward": float(0.2 + 0.5 * (1 - np.exp(-s / 60)) + rng.normal(0, 0.02)),
              "accuracy": float(0.3 + 0.3 * (1 - np.exp(-s / 80)) + rng.normal(0, 0.02))} for s in steps]
    training = dict(spec.training)
    if spec.curve == "inline":
        training["curve"] = curve
    elif spec.curve == "file":
        (run_dir / "train_metrics.jsonl").write_text("\n".join(json.dumps(r) for r in curve) + "\n")
        training["metrics_path"] = "train_metrics.jsonl"
    return training


def trained(algorithm: str, base: str) -> dict[str, Any]:
    """``model.training`` as dare-train writes it (trainers/training/evaluate.py: ``run`` names the training run)."""
    return {"run": f"train-{algorithm}-{base}", "algorithm": algorithm, "base_model": base, "step": 200,
            "config": {"lr": 1e-6}}


def standard_specs() -> list[RunSpec]:
    """14 valid runs: 4 base models, 4 trained ones, two decodings of one model, a partial run,
    a superseded rerun, a data-hash mismatch, a batch-size mismatch."""
    return [
        RunSpec("r01-llada-a", "math", "llada-8b-instruct", MATH, 0.55, architecture="llada"),
        RunSpec("r02-llada-b", "math", "llada-8b-instruct", MATH, 0.45, DECODING_B, architecture="llada"),
        RunSpec("r03-dream", "math", "dream-7b-instruct", MATH, 0.50, architecture="dream"),
        RunSpec("r04-sdar", "math", "sdar-8b-chat", MATH, 0.62, architecture="sdar", backend="lmdeploy"),
        RunSpec("r05-llada-d1", "math", "llada-8b-d1", MATH, 0.70, architecture="llada",
                training=trained("d1", "llada-8b-instruct"), curve="inline"),
        RunSpec("r06-llada-mdpo", "math", "llada-8b-mdpo", MATH, 0.60, architecture="llada",
                training=trained("mdpo", "llada-8b-instruct"), curve="file"),
        RunSpec("r07-dream-cgrpo", "math", "dream-7b-coupled-grpo", MATH, 0.56, architecture="dream",
                training=trained("coupled_grpo", "dream-7b-instruct"), curve="inline"),
        RunSpec("r08-llada-spg-partial", "math", "llada-8b-spg", {"gsm8k": 120, "math500": 80}, 0.58,
                architecture="llada", training=trained("spg", "llada-8b-instruct"), status="partial",
                used_fraction=0.5),
        RunSpec("r09-sdar-small", "math", "sdar-1.7b-chat", MATH, 0.35, architecture="sdar",
                data_sha_override={"math500": sha("math500-v0")}),
        RunSpec("r10-llada-a-old", "math", "llada-8b-instruct", MATH, 0.20, architecture="llada",
                created_at="2026-11-01T10:00:00Z"),
        RunSpec("r11-llada-plan", "planning", "llada-8b-instruct", PLANNING, 0.40, DECODING_P, architecture="llada"),
        RunSpec("r12-dream-plan", "planning", "dream-7b-instruct", PLANNING, 0.35, DECODING_P, architecture="dream"),
        RunSpec("r13-d1-plan", "planning", "llada-8b-d1", PLANNING, 0.55, DECODING_P, architecture="llada",
                training=trained("d1", "llada-8b-instruct"), curve="inline"),
        RunSpec("r14-tiny-plan", "planning", "tiny-llada", PLANNING, 0.10,
                DecodingConfig(gen_length=128, steps=128, block_length=128, batch_size=4), architecture="llada"),
    ]


def write_broken_runs(root: Path) -> dict[str, Path]:
    """Run records the build must skip: name -> the run.json path."""
    good = write_run(root, RunSpec("broken-base", "math", "broken-model", {"gsm8k": 10}, 0.5))
    record = json.loads((good / "run.json").read_text())
    (good / "run.json").unlink()
    variants = {
        "newer_schema": {**record, "schema_version": 99},
        "unknown_field": {**record, "surprise": 1},
        "hash_mismatch": {**record, "decoding": {**record["decoding"], "steps": 999}},
        "missing_field": {k: v for k, v in record.items() if k != "model"},
    }
    paths = {}
    for name, data in variants.items():
        path = root / f"broken-{name}" / "run.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(data))
        paths[name] = path
    bad_json = root / "broken-bad_json" / "run.json"
    bad_json.parent.mkdir(parents=True)
    bad_json.write_text('{"schema_version": 1, "run_id": ')
    paths["bad_json"] = bad_json
    return paths


def build_standard_fixture(root: Path, broken: bool = True) -> dict[str, Path]:
    """Write the 14 standard runs (and the broken ones) under ``root``; return run_id -> run dir."""
    dirs = {spec.run_id: write_run(root / "runs", spec) for spec in standard_specs()}
    if broken:
        write_broken_runs(root / "runs" / "broken")
    return dirs


ALGORITHMS = ("d1", "mdpo", "coupled_grpo", "spg", "bgpo")
ARCHITECTURES = ("llada", "dream", "sdar", "llada2")


def many_specs(n_runs: int = 500, n_samples: int = 1319) -> list[RunSpec]:
    """``n_runs`` distinct rows of one gsm8k-sized benchmark: 10 decodings per model, every 5th model trained."""
    specs = []
    for i in range(n_runs):
        model_index, decoding_index = divmod(i, 10)
        is_trained = model_index % 5 == 4
        name = f"model-{model_index:03d}" + (f"-{ALGORITHMS[model_index % len(ALGORITHMS)]}" if is_trained else "")
        specs.append(RunSpec(
            f"bulk-{i:04d}", "gsm8k", name, {"gsm8k": n_samples}, 0.3 + 0.4 * ((i * 37) % 100) / 100,
            DecodingConfig(gen_length=256, steps=64 + 16 * decoding_index, block_length=32),
            architecture=ARCHITECTURES[model_index % len(ARCHITECTURES)],
            training=(trained(ALGORITHMS[model_index % len(ALGORITHMS)], f"model-{model_index - 1:03d}")
                      if is_trained else None),
            curve="inline" if is_trained else None))
    return specs


def build_many_fixture(root: Path, n_runs: int = 500, n_samples: int = 1319) -> list[Path]:
    return [write_run(root, spec) for spec in many_specs(n_runs, n_samples)]


if __name__ == "__main__":  # python -m tests.leaderboards.leaderboard_fixtures OUT
    import sys

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "leaderboard-fixture")
    build_standard_fixture(target)
    print(f"wrote {len(standard_specs())} runs and 5 invalid run records under {target / 'runs'}")
