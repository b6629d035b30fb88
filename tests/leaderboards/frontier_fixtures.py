"""Hand-made run records for the frontier tests: every number chosen so the expected figures are exact.

Ten Sudoku samples, canvas 64 tokens, so tokens/s = 10 x 64 / generate_s and NFE per token = nfe / 64:

    label                                  acc   generate_s  tokens/s  nfe  NFE/token  speed front  NFE front
    low_confidence (reference: default)    0.8   6.4         100       64   1.0        yes          yes
    klass                                  0.6   2.0         320       16   0.25       yes (tie)    yes (tie)
    pc_sampler                             0.6   2.0         320       16   0.25       yes (tie)    yes (tie)
    random (rerun; the first run is older) 0.5   4.0         160       64   1.0        no (klass)   no (low_confidence)
    margin                                 0.7   16.0        40        24   0.375      no (l_c)     yes
    fastdllm dual, threshold 0.9           0.4   0.64        1000      8    0.125      yes          yes

The reference of the speed ratios is low_confidence, the default strategy, though not the oldest run.
TPF = 64 / nfe: 1, 4, 4, 1, 2.667, 8. AUP (curve: the reference's point, then the strategy's; y_max 80):
low_confidence 1 x 80 = 80; every other strategy ends more than 5 points below 80%: undefined.
Outside the group: low_confidence at gen_length 128 and at batch size 4 (one strategy each: no
frontier), a partial klass run, and another model's two runs (its own page).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dare.harness.records import BenchmarkInfo, ComponentInfo, DecodingConfig, MetricValue, ModelInfo, RunRecord

N, CANVAS = 10, 64
ENV = {"python": "3.11.7", "cpu": "Test CPU 9000", "cpu_count": 2, "torch_threads": 1, "cpu_capability": "AVX2",
       "torch": "2.13.0", "git_commit": "abc", "git_dirty": False}


@dataclass
class FrontierRun:
    run_id: str
    remasking: str
    passes: int
    generate_s: float
    nfe: int
    model: str = "tiny-llada"
    backend: str = "torch"
    created_at: str = "2026-11-20T10:00:00Z"
    status: str = "complete"
    decoding: dict[str, Any] = field(default_factory=dict)
    n: int = N  # samples; accuracy = passes / n


GROUP = [
    FrontierRun("f01-low-confidence", "low_confidence", 8, 6.4, 64, created_at="2026-11-22T09:00:00Z"),
    FrontierRun("f02-klass", "klass", 6, 2.0, 16),
    FrontierRun("f03-pc-sampler", "pc_sampler", 6, 2.0, 16),
    FrontierRun("f04-random-old", "random", 5, 8.0, 64, created_at="2026-11-19T10:00:00Z"),
    FrontierRun("f05-random", "random", 5, 4.0, 64, created_at="2026-11-21T10:00:00Z"),
    FrontierRun("f06-margin", "margin", 7, 16.0, 24),
    FrontierRun("f07-dual-threshold", "low_confidence", 4, 0.64, 8, backend="fastdllm",
                decoding={"cache": "dual", "threshold": 0.9}),
]
OUTSIDE = [
    FrontierRun("f08-long-canvas", "low_confidence", 8, 6.4, 64, decoding={"gen_length": 128, "steps": 128}),
    FrontierRun("f09-batch4", "low_confidence", 8, 6.4, 64, decoding={"batch_size": 4}),
    FrontierRun("f10-partial", "klass", 9, 1.0, 8, status="partial"),
    FrontierRun("f11-other-a", "low_confidence", 3, 6.4, 64, model="tiny-other"),
    FrontierRun("f12-other-b", "klass", 2, 3.2, 32, model="tiny-other"),
]
# label -> (accuracy, tokens/s, NFE per token, on the speed front, on the NFE front)
EXPECTED = {
    "low_confidence": (0.8, 100.0, 1.0, True, True),
    "klass": (0.6, 320.0, 0.25, True, True),
    "pc_sampler": (0.6, 320.0, 0.25, True, True),
    "random": (0.5, 160.0, 1.0, False, False),
    "margin": (0.7, 40.0, 0.375, False, True),
    "fastdllm · low_confidence · dual · threshold 0.9": (0.4, 1000.0, 0.125, True, True),
}


def write_frontier_run(root: Path, spec: FrontierRun) -> Path:
    """``root/<run_id>/run.json`` + samples.jsonl as the runner writes them, with the spec's numbers."""
    run_dir = root / spec.run_id
    run_dir.mkdir(parents=True)
    decoding = DecodingConfig(**{"gen_length": CANVAS, "steps": CANVAS, "block_length": 32, "batch_size": 8,
                                 "remasking": spec.remasking, **spec.decoding})
    value = spec.passes / spec.n
    family = "fastdllm:mdm" if spec.backend == "fastdllm" else "mdm"
    record = RunRecord(
        run_id=spec.run_id, status=spec.status, created_at=spec.created_at, suite="sudoku",
        benchmarks={"sudoku": BenchmarkInfo(
            name="sudoku", version="1", data_file="sudoku.jsonl", data_sha256="d" * 64, n_total=spec.n,
            n_used=spec.n,
            prompt_template="Solve {puzzle}", prompt_template_hash="p" * 16, verifier="sudoku", verifier_version="1")},
        model=ModelInfo(name=spec.model, path=f"/models/{spec.model}", architecture="llada",
                        fingerprint=f"fp-{spec.model}"),
        backend=ComponentInfo(name=spec.backend, version="0.1"),
        decoder=ComponentInfo(name=f"{family}:{spec.remasking}", version="1"),
        engine_identity={"dtype": "float32", "device": "cpu"}, decoding=decoding,
        metrics={"sudoku": {"accuracy": MetricValue(value=value, ci=(max(0.0, value - 0.2), min(1.0, value + 0.2)),
                                                    n=spec.n)}},
        counts={"sudoku": {"scored": spec.n, "error": 0, "unscored": 0, "generated": spec.n, "cached": 0}},
        timing={"sudoku.generate_s": spec.generate_s, "sudoku.verify_s": 0.01}, environment=ENV,
        command=["dare-eval", "--model", spec.model, "--suite", "sudoku"])
    (run_dir / "run.json").write_text(json.dumps(record.to_json(), indent=1))
    lines = [json.dumps({"benchmark": "sudoku", "id": f"sudoku/test/{i}", "index": 0, "completion": "x",
                         "passed": i < spec.passes, "score": float(i < spec.passes), "status": "scored",
                         "nfe": spec.nfe}) for i in range(spec.n)]
    (run_dir / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def write_frontier_runs(root: Path) -> Path:
    for spec in GROUP + OUTSIDE:
        write_frontier_run(root, spec)
    return root


# AUP within 5 points: 100 samples, canvas 64, TPF = 64 / nfe; the pool's y_max is pc_sampler's 82%.
AUP_GROUP = [
    FrontierRun("a01-low-confidence", "low_confidence", 80, 6.4, 64, model="tiny-aup", n=100),  # (1, 80)
    FrontierRun("a02-klass", "klass", 78, 2.0, 16, model="tiny-aup", n=100),  # (4, 78)
    FrontierRun("a03-margin", "margin", 76, 3.2, 32, model="tiny-aup", n=100),  # (2, 76)
    FrontierRun("a04-pc-sampler", "pc_sampler", 82, 3.2, 32, model="tiny-aup", n=100),  # (2, 82)
    FrontierRun("a05-random", "random", 70, 6.4, 64, model="tiny-aup", n=100),  # (1, 70)
]
# label -> (TPF, AUP or None). W(y) = exp(-3 (1 - y/82)): W(80) = 0.929442, W(78) = 0.863863, W(76) = 0.802910.
AUP_EXPECTED = {
    "low_confidence": (1.0, 80.0),  # the reference alone: 1 x 80
    # 1 x 80 + 0.5 (4 - 1)(78 x 0.863863 + 80 x 0.929442) = 80 + 1.5 (67.3813 + 74.3554) = 292.6050
    "klass": (4.0, 292.6050),
    # 80 + 0.5 (2 - 1)(76 x 0.802910 + 80 x 0.929442) = 80 + 0.5 (61.0212 + 74.3554) = 147.6883
    "margin": (2.0, 147.6883),
    # 80 + 0.5 (2 - 1)(82 x 1 + 80 x 0.929442) = 80 + 0.5 (82 + 74.3554) = 158.1777
    "pc_sampler": (2.0, 158.1777),
    "random": (1.0, None),  # 70% at the reference's TPF: 10 points below 80, undefined
}


def write_aup_runs(root: Path) -> Path:
    for spec in AUP_GROUP:
        write_frontier_run(root, spec)
    return root


def _crowd() -> list[FrontierRun]:
    """Fourteen strategies of one model within 8 points and a narrow speed band: labels of close points
    compete for the same spots; two share a label (so their long run ids are appended)."""
    runs = [FrontierRun("c00-low-confidence", "low_confidence", 74, 6.4, 64, model="tiny-crowd", n=100)]
    for i, tau in enumerate((0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)):
        runs.append(FrontierRun(f"c{i + 1:02d}-threshold", "low_confidence", 70 + (i * 3) % 8, 2.0 + 0.1 * (i % 4),
                                24 + i % 5, model="tiny-crowd", n=100, decoding={"threshold": tau}))
    runs.append(FrontierRun("c11-margin", "margin", 72, 2.1, 26, model="tiny-crowd", n=100))
    for name, option in (("20261201T161348_sudoku_tiny-crowd_6e9d733a_klass_a", 1),
                         ("20261201T161415_sudoku_tiny-crowd_c13ea68d_klass_b", 2)):
        runs.append(FrontierRun(name, "klass", 73 + option, 2.2, 25, model="tiny-crowd", n=100,
                                decoding={"extra": {"klass": {"kl_threshold": option}}}))
    return runs


CROWD = _crowd()


def write_crowd_runs(root: Path) -> Path:
    for spec in CROWD:
        write_frontier_run(root, spec)
    return root
