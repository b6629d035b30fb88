"""Our advantage estimators in verl's registry (register_adv_est) equal the plugins' own advantages."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("verl")

import torch  # noqa: E402

from dare.trainers.api import build_algorithm  # noqa: E402
from dare.trainers.batch import RolloutBatch  # noqa: E402
from dare.trainers.verl.dataproto import from_dataproto, to_dataproto  # noqa: E402
from dare.trainers.verl.exports import register_with_verl  # noqa: E402


def test_advantage_estimators_registered_in_verl_match_the_plugins():
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    names = register_with_verl()
    assert register_with_verl() == names  # idempotent (verl raises on a different re-registration)
    assert {"dare_d1", "dare_coupled_grpo", "dare_dipo"} <= set(names)
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5, 0.2, 0.9])
    uid = np.array(["a", "a", "b", "b", "c", "c"], dtype=object)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.float32)
    token_rewards = torch.zeros(6, 3)
    token_rewards[torch.arange(6), mask.sum(1).long() - 1] = rewards  # score on the last response token
    for algo in ("d1", "coupled_grpo", "dipo"):
        adv, returns = get_adv_estimator_fn(f"dare_{algo}")(token_level_rewards=token_rewards, response_mask=mask,
                                                            index=uid, config=None)
        group_ids = torch.tensor([0, 0, 1, 1, 2, 2])
        batch = RolloutBatch(prompt_ids=torch.zeros(6, 1, dtype=torch.long),
                             prompt_mask=torch.ones(6, 1, dtype=torch.bool),
                             completion_ids=torch.zeros(6, 3, dtype=torch.long), completion_mask=mask.bool(),
                             completion_attn=mask.bool(), group_ids=group_ids, rewards=rewards)
        expected = build_algorithm(algo).advantages(batch)
        assert torch.allclose(adv, expected[:, None] * mask) and torch.equal(adv, returns), algo
        assert adv.abs().sum() > 0


def test_rollout_batch_round_trips_through_dataproto_and_chunks_by_row():
    b, t = 4, 3
    batch = RolloutBatch(prompt_ids=torch.arange(b * 2).view(b, 2), prompt_mask=torch.ones(b, 2, dtype=torch.bool),
                         completion_ids=torch.arange(b * t).view(b, t),
                         completion_mask=torch.ones(b, t, dtype=torch.bool),
                         completion_attn=torch.ones(b, t, dtype=torch.bool), group_ids=torch.tensor([0, 0, 1, 1]),
                         rewards=torch.rand(b), advantages=torch.rand(b), old_logp=torch.rand(2, b, t),
                         noise=[{"t": torch.rand(b)}, {"t": torch.rand(b)}])
    data = to_dataproto(batch, {"step": 1})
    back = from_dataproto(data)
    for name in ("prompt_ids", "completion_ids", "group_ids", "rewards", "advantages", "old_logp"):
        assert torch.equal(getattr(back, name), getattr(batch, name)), name
    assert all(torch.equal(x["t"], y["t"]) for x, y in zip(back.noise, batch.noise))
    second = from_dataproto(data.chunk(2)[1])  # what rank 1 of 2 receives: rows 2..3, S-major fields too
    assert (torch.equal(second.old_logp, batch.old_logp[:, 2:])
            and torch.equal(second.noise[1]["t"], batch.noise[1]["t"][2:]))


def test_import_verl_loads_dare_through_the_verl_plugins_entry_point(tmp_path):
    """verl 0.9.1 imports the ``verl.plugins`` entry points on ``import verl``: with DARE's entry point
    installed (here: a dist-info on the path, as ``pip install`` writes it), verl's own registry holds
    ``dare_d1`` before anything imports DARE."""
    import subprocess
    import sys

    info = tmp_path / "dare_entry_probe-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dare-entry-probe\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[verl.plugins]\ndare = dare.trainers.verl.plugin\n")
    probe = ("import sys, verl\n"
             "assert 'dare.trainers.verl.plugin' in sys.modules, 'verl did not load the entry point'\n"
             "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
             "print(get_adv_estimator_fn('dare_d1').__name__)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
           "VERL_USE_EXTERNAL_PLUGINS": "dare"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "dare_d1"
