"""``block_elbo`` against a brute-force computation on the shipped tiny SDAR.

The brute force shares nothing with the estimator but the network: for each block holding target tokens it
runs the block-causal model (the decoders' attention) on the sequence up to that block's end, once per order
of the block's target positions and once per step of that order, and averages the chain rule's log-probs over
all orders (the any-order autoregressive likelihood, 4! orders of up to 4 forwards per block here). With
block length 1 that is the exact left-to-right likelihood. The estimator's exact mode (one ``[noisy | clean]``
row per subset, weights 1 / (|M| C(n, |M|))) must give the same number, and the Monte-Carlo mode's mean must
sit within four of its standard errors of it.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from dare.backends.engines.torch import TorchEngine
from dare.backends.models.masks import block_causal_mask
from dare.harness.engine import EngineContext
from dare.harness.likelihood import LikelihoodRequest

MODEL = Path(__file__).resolve().parents[2] / "configs" / "models" / "tiny-sdar"
REQUEST = LikelihoodRequest("r", "Sudoku: 1200034000214300", " 1243 3421", seed=7)


@pytest.fixture(scope="module")
def engine():
    return TorchEngine(EngineContext(model_name="tiny-sdar", model_path=MODEL, device="cpu"))


def brute_force(model, prefix: list[int], target: list[int], block: int) -> float:
    """Sum over blocks of the mean over orders of the chain rule, each step its own forward."""
    seq = torch.tensor(prefix + target)
    total = 0.0
    for start in range((len(prefix) // block) * block, len(seq), block):
        end = min(start + block, len(seq))
        where = list(range(max(start, len(prefix)), end))
        orders = list(itertools.permutations(where))
        for order in orders:
            x = seq[:end].clone()
            x[list(order)] = model.mask_id
            for i in order:
                positions = torch.arange(end)[None]
                mask = block_causal_mask(positions, torch.ones(1, end, dtype=torch.bool), block)
                with torch.inference_mode():
                    logits = model.net(x[None], positions, mask)[0, i].double()
                total += logits.log_softmax(-1)[seq[i]].item() / len(orders)
                x[i] = seq[i]
    return total


@pytest.mark.parametrize("block", [4, 2, 1])
def test_exact_mode_is_the_brute_force_likelihood(engine, block):
    info = engine.likelihood_estimator("block_elbo", {"mode": "exact", "block_length": block})
    model = engine.model
    enc = info.spec.encode(model.tokenizer, REQUEST, model.eos_id, 4096)
    assert block != 4 or len(enc.prefix) % block != 0  # the target starts inside a block: context shares it
    (result,) = engine.loglikelihood([REQUEST], info)
    assert info.exact and result.stderr == 0.0
    assert result.logprob == pytest.approx(brute_force(model, enc.prefix, enc.target, block), abs=1e-4)


def test_monte_carlo_mean_is_the_exact_value(engine):
    exact = engine.loglikelihood([REQUEST], engine.likelihood_estimator("block_elbo", {"mode": "exact"}))[0]
    mc = engine.loglikelihood([REQUEST], engine.likelihood_estimator("block_elbo", {"mc_num": 1000}))[0]
    assert 0 < mc.stderr < 0.05 * abs(exact.logprob)
    assert abs(mc.logprob - exact.logprob) < 4 * mc.stderr, (mc, exact)


def test_exact_mode_refuses_blocks_it_cannot_enumerate(engine):
    from dare.harness.errors import ConfigError

    with pytest.raises(ConfigError, match="mode=exact enumerates 2\\^32"):
        engine.likelihood_estimator("block_elbo", {"mode": "exact", "block_length": 32})
