"""Every preset differs from its algorithm's official defaults (in settings and, for the new ones, in the
loss), and the estimators' distinguishing properties hold on the masks *they* draw and feed the model."""

from __future__ import annotations

import pytest
import torch

from dare.backends.models.loader import load_model
from dare.trainers import build_algorithm, build_estimator
from dare.trainers.training.config import catalog, resolve_algorithm
from dare.trainers.training.policy import ModelPolicy

from .toy import ContextFreePolicy, JointPolicy, make_batch

NAMES_A_DEFAULT = {"dipo_online"}  # DiRL's rl.yaml runs one update per batch (num_iterations 1): the default


@pytest.mark.parametrize("preset", sorted(catalog("algorithms")))
def test_every_preset_changes_some_official_default(preset):
    name, settings = resolve_algorithm(preset, {})
    if preset in NAMES_A_DEFAULT:
        official = build_algorithm(name).config
        assert all(getattr(build_algorithm(name, settings).config, k) == getattr(official, k) for k in settings)
        return
    official = build_algorithm(name).config
    mine = build_algorithm(name, settings).config
    changed = {k for k in settings if getattr(mine, k) != getattr(official, k)}
    assert changed, f"{preset} repeats the defaults of {name}"


def test_d1_attended_prompt_padding_changes_the_estimate_only_when_there_is_padding(tiny):
    """d1 runs the model without an attention mask: left padding is a visible token (and is masked like the
    prompt); DARE hides it. On an unpadded batch the two are identical."""
    policy = ModelPolicy(load_model(tiny["llada"]), chunk=8)
    batch = make_batch(2, 6, [5, 6, 7, 8], prompt_token=9)
    batch.prompt_ids[:, :3] = policy.pad_id
    batch.prompt_mask[:, :3] = False
    attended = build_estimator("one_step", {"prompt_mask_prob": 0.0})
    hidden = build_estimator("one_step", {"prompt_mask_prob": 0.0, "prompt_padding": "hidden"})
    noise = attended.draw(batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        a = attended.estimate(policy, batch, noise).token_logp
        h = hidden.estimate(policy, batch, noise).token_logp
        assert not torch.allclose(a, h)
        full = make_batch(2, 6, [5, 6, 7, 8], prompt_token=9)
        assert torch.allclose(attended.estimate(policy, full, noise).token_logp,
                              hidden.estimate(policy, full, noise).token_logp)


class Spy(JointPolicy):
    """Records the inputs of every forward, so a test sees the corruptions the estimator really ran."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inputs: list[torch.Tensor] = []

    def token_logp(self, input_ids, positions, mask, index, targets, temperature: float = 1.0):
        self.inputs.append(input_ids.clone())
        return super().token_logp(input_ids, positions, mask, index, targets, temperature)


def test_coupled_feeds_complementary_corruptions_and_a_full_mask():
    spy = Spy(n=4, vocab=3, prompt_len=1)
    est = build_estimator("coupled", {})
    batch = make_batch(6, 1, [2, 0, 1, 2])
    est.estimate(spy, batch, est.draw(batch, torch.Generator().manual_seed(3)))
    x = spy.inputs[0][:, 1:].view(3, 6, 4) == spy.mask_id  # the three stacked copies, response part
    assert torch.equal(x[0] ^ x[1], torch.ones_like(x[0]))  # every token hidden in exactly one of the pair
    assert x[2].all() and x[0].any() and x[1].any()


def test_coupled_weights_one_over_t_on_a_context_free_model():
    policy = ContextFreePolicy(n=4, vocab=3)
    est = build_estimator("coupled", {"include_full_mask": False})
    batch = make_batch(4, 1, [2, 0, 1, 2])
    noise = est.draw(batch, torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = est.estimate(policy, batch, noise).token_logp.double()
        lp = policy.logits.log_softmax(-1)[torch.arange(4), torch.tensor([2, 0, 1, 2])]
    t = float(noise["t"][0])
    expected = 0.5 * torch.where(noise["first"], lp / t, lp / (1 - t))
    assert torch.allclose(got, expected, atol=1e-9) and t not in (0.5,)


def test_espo_feeds_each_draw_and_its_exact_complement():
    spy = Spy(n=4, vocab=3, prompt_len=1)
    est = build_estimator("espo_elbo", {"samples": 2})
    batch = make_batch(5, 1, [2, 0, 1, 2])
    noise = est.draw(batch, torch.Generator().manual_seed(1))
    est.estimate(spy, batch, noise)
    hidden = torch.cat(spy.inputs)[:, 1:] == spy.mask_id  # (2 halves x 2 draws x 5 rows, 4)
    halves = hidden.view(2, 2, 5, 4)
    assert torch.equal(halves[0], noise["masked"].transpose(0, 1))
    assert torch.equal(halves[0] ^ halves[1], torch.ones_like(halves[0]))


def test_block_elbo_keeps_the_block_structure():
    """BD3LM: the noisy copy of block b sees noisy block b and clean blocks < b; clean never sees noisy."""
    from dare.trainers.training.sequences import noisy_clean_mask

    positions = torch.arange(6)[None]
    allowed = noisy_clean_mask(positions, torch.ones(1, 6, dtype=torch.bool), 2)[0, 0]
    noisy_to_clean = allowed[:6, 6:]
    blk = positions[0] // 2
    assert torch.equal(noisy_to_clean, blk[None, :] < blk[:, None])
    assert not (allowed[6:, :6] & ~torch.eye(12, dtype=torch.bool)[6:, :6]).any()


def test_each_built_in_name_is_written_once_and_the_policies_speak_the_protocol(tiny):
    """Names live only in the decorators (trainers/plugin.py imports the modules); the trainable policy and
    the toy policies satisfy the Policy protocol the estimators are typed against."""
    from pathlib import Path

    from dare.harness.registry import algorithms, estimators
    from dare.trainers import Policy

    plugin = (Path(__file__).parents[2] / "trainers" / "plugin.py").read_text()
    for name in [*algorithms.names(), *estimators.names()]:
        if "/" not in name:  # third-party names are the plugins' own
            assert f'"{name}"' not in plugin, name
    assert algorithms.get("d1").name == "d1" and estimators.get("coupled").name == "coupled"
    assert isinstance(ModelPolicy(load_model(tiny["llada"])), Policy)
    assert isinstance(JointPolicy(), Policy) and isinstance(ContextFreePolicy(), Policy)


@pytest.mark.parametrize("algo, settings, expected", [
    ("d1", {}, 0.6),                                  # no stated rollout temperature: the project default
    ("just_grpo", {}, 1.0),                           # JustGRPO samples at 1.0 (LeapLabTHU/JustGRPO grpo.py)
    ("mdpo", {}, 0.1),                                # MDPO's math recipe temperature
    ("mdpo", {"rollout_decoding": {"temperature": 0.7}}, 0.7),  # the user's setting wins
])
def test_rollout_temperature_algorithm_beats_the_default_and_the_user_beats_both(tmp_path, algo, settings, expected):
    from dare.trainers.training.config import TrainConfig
    from dare.trainers.training.trainer import LocalTrainer

    config = TrainConfig(algorithm=algo, suite="sudoku", model="tiny-llada", steps=1, prompts_per_step=1,
                         group_size=2, evaluate=False, device="cpu", **settings)
    assert LocalTrainer(config, tmp_path / algo).rollout_decoding.temperature == expected
