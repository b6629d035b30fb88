"""Does one update point uphill? For every registered RL algorithm, on each model family its paper allows, one
optimizer step of the local trainer on a fixed rollout batch must raise the exact likelihood of the decoding
policy for the rollouts it rewards, relative to those it penalises:

    mean Δℓ(A > 0) - mean Δℓ(A < 0) > 0

with ℓ the trajectory log-likelihood of a rollout (log p_T of every committed token at the step that
committed it, replayed from the recorded step map under the weights before and after the step; T the
rollout temperature). The same step trained on -A must give the opposite sign: the test fails when the
update ignores or reverses the advantages' direction, whatever the algorithm's own estimator says.

Setting (:mod:`dare.trainers.experiments.uphill`): shipped tiny-llada / tiny-sdar on Sudoku, 4 prompts x 4
samples (seed 0) at temperature 2 (the trained tiny models solve nearly every puzzle at T <= 1, so rewards
would all be equal), one inner update at lr 1e-4 with the trainer's AdamW. Measured gaps and how they
vary with the seed: trainers/README.md, "Does the update point uphill?".
"""

from __future__ import annotations

import pytest

from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms)
from dare.trainers.experiments.uphill import CASES, LR, measure

MARGIN = 1e-3  # nats: far above the replay's float32 round-off, far below every measured gap
SLOW = {("just_grpo", "tiny-llada")}  # one full-canvas forward per response token: about 40 s a run on one thread
# BGPO and EBPO draw 16 ELBO samples: 4 here (as configs/experiments/compare_sudoku_block.yaml), 16 under -m slow;
# UniGRPO's 35 masked copies per rollout: 4 here, 35 under -m slow; d-TreeRPO grows 2 x 2 trees here (6 edges
# per prompt), its 4 x 4 default (20) under -m slow
LIGHTER = {"bgpo": ({"estimator_args": {"samples": 4}}, "4samples"),
           "ebpo": ({"estimator_args": {"samples": 4}}, "4samples"),
           "unigrpo": ({"estimator_args": {"samples": 4}}, "4samples"),
           "d_treerpo": ({"trees": 2, "branch": 2}, "2x2tree")}
# UniGRPO keeps groups whose mean reward lies in [0.2, 0.8]: the flip's negated rewards would drop them all (its
# filter has its own tests in test_unigrpo.py), so the probe keeps every group
EVERY_CASE = {"unigrpo": {"pass_rate_band": None}}


#: probed in the default run (a masked and a block model); every other case runs under -m extended
QUICK = {("d1", "tiny-llada"), ("coupled_grpo", "tiny-sdar")}


def _cases() -> list:
    cases = []
    for algo, model in CASES:
        quick = [] if (algo, model) in QUICK else [pytest.mark.extended]
        slow = [pytest.mark.slow] if (algo, model) in SLOW else quick
        base = EVERY_CASE.get(algo, {})
        if algo in LIGHTER:
            overrides, label = LIGHTER[algo]
            cases.append(pytest.param(algo, model, {**base, **overrides}, id=f"{algo}-{model}-{label}", marks=quick))
            slow = [pytest.mark.slow]
        cases.append(pytest.param(algo, model, base or None, id=f"{algo}-{model}", marks=slow))
    return cases


@pytest.mark.parametrize("flip", [False, True], ids=["A", "minus_A"])
@pytest.mark.parametrize("algo, model, overrides", _cases())
def test_one_update_raises_the_decoding_likelihood_of_positive_advantage_rollouts(algo, model, overrides, flip,
                                                                                   tmp_path):
    """With the true advantages the gap is positive; trained on -A (every reward negated) it is negative."""
    u = measure(algo, model, flip=flip, lr=LR, overrides=overrides, run_dir=tmp_path)
    a = u.rollout_advantages
    assert (a > 0).sum() >= 2 and (a < 0).sum() >= 2, "the fixed batch must hold both signs of advantage"
    assert u.delta.abs().max() > MARGIN, "the step did not change the decoding policy"
    report = f"mean Δℓ: A>0 {u.mean_delta(+1):+.4f}, A<0 {u.mean_delta(-1):+.4f}, gap {u.gap:+.4f}"
    if flip:
        assert u.gap < -MARGIN, report
    else:
        assert u.gap > MARGIN, report


def test_every_registered_rl_algorithm_is_probed_on_every_family_it_allows():
    """A newly registered algorithm (or one that changes its model family) must join CASES; only the supervised
    and preference objectives, which have no rollouts or advantages, stay out."""
    from dare.harness.registry import algorithms
    from dare.trainers.experiments.uphill import FAMILIES

    expected = set()
    for name in algorithms.names():
        cls = algorithms.get(name)
        if cls.needs.rollout and cls.needs.rewards:
            expected |= {(cls.name, m) for m, kind in FAMILIES.items() if cls.needs.attention in (None, kind)}
    assert set(CASES) == expected and len(CASES) == len(expected)
    assert {n for n, _ in CASES}.isdisjoint({"sft", "dpo", "vrpo"})


def test_the_replayed_likelihood_is_the_samplers(tiny):
    """The probe's ℓ is the decoding policy's: at the rollout temperature the replay of a recorded step map gives
    the same per-token log-probabilities as the sampler's tempered softmax at that step (one step per token,
    so the state before each commit is known without the replay), and dividing by another temperature does not."""
    import torch

    from dare.backends.engines.torch import TorchEngine
    from dare.harness.engine import EngineContext
    from dare.harness.records import DecodingConfig, Message
    from dare.trainers.experiments.uphill import trajectory_logp
    from dare.trainers.training.policy import ModelPolicy
    from dare.trainers.training.rollout import rollout_batch
    from dare.trainers.training.sequences import build_layout, key_mask

    class Item:
        def __init__(self, sid, text):
            self.sample = type("S", (), {"id": sid})()
            self.messages = (Message(role="user", content=text),)

    engine = TorchEngine(EngineContext(model_name="tiny", model_path=tiny["llada"], device="cpu",
                                       options={"record_trajectory": True}))
    decoding = DecodingConfig(gen_length=6, steps=6, block_length=6, temperature=1.5, num_samples=2, batch_size=2)
    batch, _ = rollout_batch(engine, [Item("a", "hi there")], decoding, seed=3, count_padding=True, trajectory=True)
    policy = ModelPolicy(engine.model)
    layout = build_layout(batch)
    expected = torch.zeros(batch.size, dtype=torch.float64)
    with torch.no_grad():
        for s in range(6):
            x = layout.tokens.clone()
            x[:, layout.response] = x[:, layout.response].masked_fill(batch.commit_step >= s, policy.mask_id)
            logits = engine.model.net(x, layout.positions, key_mask(layout.valid))[:, layout.response].double()
            lp = (logits / 1.5).log_softmax(-1).gather(-1, batch.completion_ids[..., None])[..., 0]
            expected += (lp * (batch.commit_step == s)).sum(1)
    assert torch.allclose(trajectory_logp(policy, batch, 1.5), expected, atol=1e-4)
    assert not torch.allclose(trajectory_logp(policy, batch, 1.0), expected, atol=1e-2)
