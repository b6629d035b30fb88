"""dare-train --engine verl: 2 CPU workers (FSDP2 over gloo, verl single controller) equal the local trainer.

The workers roll out, compute old / reference log-probs and update; the driver scores rewards and holds no
weights. The SDAR/DiPO case is marked slow (run it with -m slow); the module takes about 1.5 minutes by
default on 2 shared cores."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")
pytest.importorskip("verl")


from dare.backends.models.tiny import write_tiny_checkpoint  # noqa: E402
from dare.trainers.cli import main  # noqa: E402

from ..run_records import metric_rows, weights  # noqa: E402
from .vowels import vowel_benchmarks  # noqa: E402

pytestmark = pytest.mark.timeout(240)

STEPS = ["--steps", "2", "--no-eval", "--set", "prompts_per_step=2", "--set", "group_size=2",
         "--set", "micro_batch_size=1", "--set", "decoding.gen_length=8", "--set", "decoding.steps=8",
         "--set", "decoding.block_length=4", "--set", "lr=1e-2", "--set", "algo.inner_steps=2",
         "--set", "rollout.temperature=1.0", "--set", "rollout.batch_size=2"]
# rollout.batch_size = one rank's share of the 4 rows (the verl default): the local trainer then decodes the
# same 2-row batches as the ranks (decoded tokens depend on the batch around them; measured on tiny SDAR)
# float32. Losses agree to ~1e-6 relative; parameters after 4 AdamW updates at lr 1e-2 to ~2e-5 (Adam divides
# by sqrt(v), so summation-order differences of tiny gradient entries show up at ~1e-3 of one lr step).
LOSS_TOLERANCE = 1e-5
PARAM_TOLERANCE = 1e-4


@pytest.fixture
def vowels_suite(tmp_path, monkeypatch):
    with vowel_benchmarks(tmp_path, monkeypatch):
        yield "vowels"


# wd1 normalises its weights over a group: the workers see the rows they are sent, so its micro-batches hold
# whole groups here (4 rows: one group of 4 per worker); its loss sums tokens, so lr 1e-3 moves it as far as
# 1e-2 moves d1's token mean
WD1 = ["--set", "group_size=4", "--set", "micro_batch_size=4", "--set", "lr=1e-3"]


@pytest.mark.parametrize("algo, arch, more", [
    ("d1", "llada", []), pytest.param("dipo", "sdar", [], marks=pytest.mark.slow), ("wd1", "llada", WD1),
    ("gdsd", "llada", []), ("unigrpo", "llada", [])])
def test_verl_engine_matches_local_trainer(ray_cluster, tmp_path, vowels_suite, algo, arch, more):
    suite = vowels_suite
    ckpt = write_tiny_checkpoint(arch, tmp_path / arch, seed=3)
    common = ["--algo", algo, "--model-path", str(ckpt), "--suite", suite, "--out", str(tmp_path), *STEPS, *more]
    assert main([*common, "--run-name", "local"]) == 0
    assert main([*common, "--run-name", "verl", "--engine", "verl"]) == 0
    local, verl = metric_rows(tmp_path / "local", timings=True), metric_rows(tmp_path / "verl", timings=True)
    assert [r["step"] for r in verl] == [1, 2]
    for a, b in zip(local, verl):
        assert b["reward"] == a["reward"]  # same rollouts: the driver's weights were synced after step 1
        for key in ("loss", "grad_norm"):
            assert abs(a[key] - b[key]) <= LOSS_TOLERANCE * max(1.0, abs(a[key])), (key, a[key], b[key])
    before = weights(ckpt)
    after_local = weights(tmp_path / "local" / "checkpoints" / "step-000002")
    after_verl = weights(tmp_path / "verl" / "checkpoints" / "step-000002")
    diff = max(float((after_local[k].float() - after_verl[k].float()).abs().max()) for k in after_local)
    moved = max(float((after_local[k].float() - before[k].float()).abs().max()) for k in after_local)
    print(f"{algo}/{arch}: max |param(verl) - param(local)| = {diff:.3g}, max |param moved| = {moved:.3g}")
    assert diff < PARAM_TOLERANCE, f"max |param(verl) - param(local)| = {diff:.3g}"
    assert moved > 1e-3, f"parameters barely moved ({moved:.3g}): the comparison would be vacuous"


def test_uneven_rows_are_refused_before_workers_start(ray_cluster, tmp_path, capsys):
    ckpt = write_tiny_checkpoint("llada", tmp_path / "llada", seed=1)
    args = ["--algo", "d1", "--model-path", str(ckpt), "--suite", "sudoku", "--out", str(tmp_path), *STEPS,
            "--set", "prompts_per_step=3", "--set", "group_size=1", "--engine", "verl"]
    assert main(args) == 2
    assert "not divisible by 2 workers" in capsys.readouterr().err


def test_algorithms_with_a_driver_side_prepare_stage_are_refused(ray_cluster, tmp_path, capsys):
    """The driver holds no weights, so a ``prepare`` that runs the policy (MDPO's step predictions) cannot
    run there: refused with a clear message before any worker starts."""
    from dare.harness.registry import algorithms

    class Prepared(algorithms.get("d1")):
        name = "d1_prepared"

        def prepare(self, policy, batch, scorer):
            policy.net(batch.prompt_ids)

    saved = algorithms.snapshot()
    algorithms.register("d1_prepared", Prepared)
    try:
        ckpt = write_tiny_checkpoint("llada", tmp_path / "llada", seed=1)
        args = ["--algo", "d1_prepared", "--model-path", str(ckpt), "--suite", "sudoku", "--out", str(tmp_path),
                *STEPS, "--engine", "verl"]
        assert main(args) == 2
    finally:
        algorithms.restore(saved)
    assert "its prepare stage needs the policy on the driver" in capsys.readouterr().err


def test_workers_roll_out_with_their_updated_weights_and_the_driver_holds_none(ray_cluster, tmp_path):
    """Rollout runs on the workers' sharded policy: after an update it decodes with the new weights exactly as
    an unsharded engine does, though the ranks run different numbers of forwards (a confidence threshold lets
    rows finish early); the driver's model and reference never hold weights between checkpoints."""
    from dare.backends.engines.torch import TorchEngine
    from dare.harness.engine import EngineContext
    from dare.trainers.training.config import TrainConfig
    from dare.trainers.training.rollout import rollout_requests
    from dare.trainers.verl.launch import stop_worker_group
    from dare.trainers.verl.trainer import build

    ckpt = write_tiny_checkpoint("llada", tmp_path / "llada", seed=4)
    decoding = {"gen_length": 8, "steps": 8, "block_length": 4, "threshold": 0.004}
    config = TrainConfig(algorithm="d1", model_path=str(ckpt), suite="sudoku", steps=2, save_every=2,
                         prompts_per_step=2, group_size=2, micro_batch_size=1, lr=1e-2, decoding=decoding,
                         rollout_decoding={"temperature": 1.0}, evaluate=False)
    trainer = build(config, tmp_path / "run")
    try:
        assert [i["engine"] for i in trainer.worker_info] == ["torch", "torch"]
        assert len({i["pid"] for i in trainer.worker_info}) == 2
        trainer.step(0)  # the first checkpoint is at step 2: nothing was gathered to the driver
        assert all(p.is_meta for p in trainer.policy.parameters())
        assert all(p.is_meta for p in trainer.reference.parameters())
        items, seed = trainer.items[:4], 123
        gens = trainer._rollout(items, seed, True)[1]  # 8 requests: 4 per rank, decoded as 2 batches of 2
        state = trainer.group.full_state()[0]
    finally:
        stop_worker_group(trainer.group)
        trainer.verifiers.close()
    decoding = trainer.rollout_decoding
    assert decoding.batch_size == 2  # the default: one rank's share of a step's 4 rows
    requests = rollout_requests(items, decoding, seed)
    engine = TorchEngine(EngineContext(model_name="tiny-llada", model_path=ckpt, device="cpu"))
    initial = [g.token_ids for g in engine.generate(requests, decoding)]
    engine.model.net.load_state_dict(state)
    expected = engine.generate(requests, decoding)
    assert [g.token_ids for g in gens] == [g.token_ids for g in expected]
    assert initial != [g.token_ids for g in expected], "the update did not change the rollout: a vacuous check"
    forwards = trainer.rollout_forwards
    print(f"network forwards per rank: {forwards}; per row: {[g.nfe for g in gens]}")
    assert forwards[0] != forwards[1], "both ranks ran the same number of forwards: lockstep is not exercised"
