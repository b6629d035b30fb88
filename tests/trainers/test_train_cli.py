"""dare-train end to end on tiny random checkpoints: every algorithm, errors, resume, auto-evaluation."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from dare.harness.records import Verdict
from dare.harness.verifiers.base import Verifier
from dare.trainers.cli import main
from dare.trainers.training.evaluate import read_eval_marker

from ..user_configs import user_benchmarks

FAST = ["--steps", "2", "--no-eval", "--set", "prompts_per_step=1", "--set", "group_size=2",
        "--set", "micro_batch_size=1", "--set", "decoding.gen_length=8", "--set", "decoding.steps=8",
        "--set", "decoding.block_length=4", "--set", "lr=1e-2"]


class AlnumShare(Verifier):
    """Reward = share of ASCII letters and digits in the completion (a real, dense signal on random text)."""

    name, version = "alnum_share", "1"

    def verify(self, sample, completion):
        share = sum(c.isascii() and c.isalnum() for c in completion) / max(len(completion), 1)
        return Verdict(score=share, passed=share > 0.5)


@pytest.fixture
def digits_suite(tmp_path, monkeypatch):
    """A benchmark 'digits' (Sudoku prompts and data, AlnumShare reward) from a user config directory."""
    with user_benchmarks(tmp_path, monkeypatch, {"digits": ("alnum_share", AlnumShare)}):
        yield "digits"


def _weights(directory):
    out = {}
    for f in sorted(directory.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_list_shows_algorithms_presets_and_estimators(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in ("sft", "d1", "coupled_grpo", "dipo", "d1_dare", "one_step", "coupled", "mc_elbo", "block_elbo",
                 "block_trajectory"):
        assert name in out


@pytest.mark.parametrize("algo, arch", [("sft", "llada"), ("sft", "sdar"), ("d1", "llada"),
                                        ("coupled_grpo", "dream"), ("dipo", "sdar")])
def test_every_algorithm_trains_two_steps(tiny, tmp_path, digits_suite, algo, arch, capsys):
    suite = "sudoku" if algo == "sft" else digits_suite
    args = ["--algo", algo, "--model-path", str(tiny[arch]), "--suite", suite, "--out", str(tmp_path), *FAST,
            "--set", "algo.inner_steps=2", "--set", "rollout.temperature=1.0"]
    assert main(args) == 0
    run_dir = tmp_path / f"{algo}-{suite}-{arch}-s0"
    rows = _rows(run_dir)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in rows)
    final = run_dir / "checkpoints" / "step-000002"
    before, after = _weights(tiny[arch]), _weights(final)
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before), "no parameter changed"
    if algo != "sft":
        assert rows[0]["first_inner_ratio_max_dev"] == 0.0  # ratio exactly 1 before the first update
        assert {"reward", "accuracy", "clip_fraction", "entropy", "completion_length"} <= rows[0].keys()
        assert {"rollout", "reward", "old_logp", "update"} <= rows[0]["time"].keys()


@pytest.mark.parametrize("args, message", [
    (["--algo", "d2"], "unknown algorithm 'd2'; did you mean 'd1'"),
    (["--algo", "d1", "--suite", "math500"], "no train split for math500"),
    (["--algo", "dipo", "--engine", "replay"], "cannot record them"),
    (["--algo", "d1", "--engine", "replay"], "cannot roll out a live policy"),
    (["--algo", "sft", "--engine", "replay"], "cannot hold a trainable model"),
    (["--algo", "dipo", "--model-arch", "llada"], "needs a block-causal model"),
])
def test_bad_input_is_one_line_and_exit_2(tiny, tmp_path, capsys, args, message):
    model = tiny["llada"] if "--model-arch" in args else tiny["sdar"]
    args = [a for a in args if a not in ("--model-arch", "llada")]
    base = ["--model-path", str(model), "--out", str(tmp_path), *FAST]
    if "--suite" not in args:
        base += ["--suite", "sudoku"]
    assert main([*args, *base]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err


def test_killed_run_resumes_with_the_same_batches_and_no_duplicate_steps(tiny, tmp_path, digits_suite):
    common = ["--algo", "d1", "--model-path", str(tiny["llada"]), "--suite", digits_suite, *FAST,
              "--set", "algo.inner_steps=2", "--set", "rollout.temperature=1.0"]
    assert main([*common, "--out", str(tmp_path / "straight"), "--steps", "2"]) == 0
    resumed = tmp_path / "resumed"
    assert main([*common, "--out", str(resumed), "--steps", "1"]) == 0  # 1 step, checkpointed
    run_dir = resumed / f"d1-{digits_suite}-llada-s0"
    with (run_dir / "metrics.jsonl").open("a") as f:  # killed after logging step 2, before its checkpoint
        f.write(json.dumps({"step": 2, "loss": 123.0}) + "\n")
    assert main([*common, "--out", str(resumed), "--steps", "2"]) == 0
    rows = _rows(run_dir)
    assert [r["step"] for r in rows] == [1, 2] and rows[1]["loss"] != 123.0
    straight = _rows(tmp_path / "straight" / f"d1-{digits_suite}-llada-s0")
    assert [r["reward"] for r in rows] == [r["reward"] for r in straight]
    assert [r["loss"] for r in rows] == [r["loss"] for r in straight]
    a = _weights(tmp_path / "straight" / f"d1-{digits_suite}-llada-s0" / "checkpoints" / "step-000002")
    b = _weights(run_dir / "checkpoints" / "step-000002")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_refuses_other_settings(tiny, tmp_path, capsys):
    common = ["--algo", "sft", "--model-path", str(tiny["llada"]), "--suite", "sudoku", "--out", str(tmp_path), *FAST]
    assert main([*common, "--steps", "1"]) == 0
    capsys.readouterr()
    assert main([*common, "--set", "lr=0.5", "--set", "algo.normalise=masked_tokens"]) == 2
    err = capsys.readouterr().err
    assert "different settings (algo.normalise unset there, 'masked_tokens' now; lr 0.01 there, 0.5 now)" in err, err


def test_one_progress_line_per_step_then_the_evaluation_table(tiny, tmp_path, capsys):
    args = ["--algo", "sft", "--model-path", str(tiny["llada"]), "--suite", "sudoku", "--out", str(tmp_path),
            *[a for a in FAST if a != "--no-eval"], "--eval-limit", "2"]
    assert main(args) == 0
    captured = capsys.readouterr()
    steps = [line for line in captured.err.splitlines() if line.startswith("dare-train: step ")]
    assert [line.split()[2] for line in steps] == ["1/2", "2/2"], captured.err
    assert all(" loss " in line and " s/step" in line and " ETA " in line for line in steps)
    assert steps[-1].endswith("ETA 0s")
    table = [line.split() for line in captured.out.splitlines() if line.strip().startswith("sudoku ")]
    assert [row[1] for row in table] == ["accuracy", "partial_credit"] and all(row[-1] == "n=2" for row in table)


def test_progress_durations_and_eta():
    from dare.trainers.state.progress import StepProgress, duration

    assert [duration(s) for s in (8.4, 75.2, 3725)] == ["8s", "1m15s", "1h02m"]
    progress = StepProgress(start=2, total=10)
    progress.began -= 30.0  # two steps of this process took 30 s: 15 s/step, 6 steps left
    line = progress.line(4, {"reward": 0.5, "loss": 0.25})
    assert line == "step 4/10  reward 0.5  loss 0.25  15.0 s/step  ETA 1m30s", line


def test_auto_evaluation_links_the_run_record_to_training(tiny, tmp_path, digits_suite):
    args = ["--algo", "d1_dare", "--model-path", str(tiny["llada"]), "--suite", digits_suite, "--out", str(tmp_path),
            *[a for a in FAST if a != "--no-eval"], "--eval-limit", "2"]
    assert main(args) == 0
    run_dir = tmp_path / f"d1_dare-{digits_suite}-llada-s0"
    assert not (run_dir / "eval_run.txt").read_text().startswith("/")  # relative: the folder can move
    record = json.loads((read_eval_marker(run_dir) / "run.json").read_text())
    training = record["model"]["training"]
    assert training["algorithm"] == "d1" and training["step"] == 2 and training["run"] == run_dir.name
    assert [p["step"] for p in training["curve"]] == [1, 2] and "reward" in training["curve"][0]
    assert record["decoding"]["gen_length"] == 8 and record["status"] == "complete"


def test_an_algorithm_takes_any_estimator_by_name(tiny, tmp_path, digits_suite, capsys):
    """N + M: d1's loss on the exact masked-diffusion trajectory estimator; its needs follow the estimator."""
    args = ["--algo", "d1", "--model-path", str(tiny["llada"]), "--suite", digits_suite, "--out", str(tmp_path),
            *FAST, "--set", "algo.estimator=mdm_trajectory", "--set", "algo.estimator_args={}",
            "--set", "algo.inner_steps=1", "--set", "rollout.temperature=1.0"]
    assert main(args) == 0
    rows = _rows(tmp_path / f"d1-{digits_suite}-llada-s0")
    assert rows[0]["first_inner_ratio_max_dev"] == 0.0 and rows[1]["step"] == 2
    assert main([*args, "--engine", "replay", "--run-name", "other"]) == 2
    assert "cannot record them" in capsys.readouterr().err


def test_a_run_directory_is_trained_by_one_process_at_a_time(tiny, tmp_path, capsys):
    import subprocess
    import sys

    run_dir = tmp_path / "sft-sudoku-llada-s0"
    run_dir.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
                               str(run_dir / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        args = ["--algo", "sft", "--model-path", str(tiny["llada"]), "--suite", "sudoku", "--out", str(tmp_path),
                *FAST]
        assert main(args) == 2
        assert "is being trained by another process" in capsys.readouterr().err
        assert not (run_dir / "metrics.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(args) == 0  # the lock died with its process
