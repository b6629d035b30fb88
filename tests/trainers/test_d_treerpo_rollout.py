"""d-TreeRPO's tree rollout decodes with the engine's own decoder: a decode split into step windows is the
uninterrupted decode, the tree's node canvases are those of DARE's ``DTreeRPORollout`` at temperature 0 (the
fixture, branching inside blocks), and trees are seeded per edge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dare.backends.decoding.common import Canvas
from dare.backends.engines.torch import TorchEngine
from dare.harness.engine import EngineContext
from dare.harness.errors import ConfigError
from dare.harness.records import DecodingConfig, Message
from dare.harness.registry import decoders
from dare.trainers.training.tree_rollout import tree_rollout

pytestmark = pytest.mark.cross_cpu  # against numbers made on another CPU: CI reruns these with AVX2 kernels

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "dtreerpo_official.json").read_text())


class Item:
    def __init__(self, sid, messages):
        self.sample = type("S", (), {"id": sid})()
        self.messages = messages


@pytest.mark.parametrize("remasking", ["low_confidence", "random"])
def test_a_decode_split_into_windows_is_the_uninterrupted_decode(tiny, remasking):
    """Steps 0..4 then 5..15 (a window ending inside a block of 4 steps) with the same generators commit what
    one decode commits, at the same global steps."""
    engine = TorchEngine(EngineContext(model_name="tiny", model_path=tiny["llada"], device="cpu"))
    model = engine.model
    cfg = DecodingConfig(gen_length=16, steps=16, block_length=4, temperature=1.0, remasking=remasking)
    spec = decoders.get(f"mdm:{remasking}")
    prompts = [engine.prompt_ids((Message(role="user", content=t),)) for t in ("hello there", "a b")]

    def canvas():
        return Canvas.build(prompts, 16, model.mask_id, model.pad_id, "cpu")

    def gens():
        return [torch.Generator().manual_seed(s) for s in (3, 4)]

    whole = spec(model, canvas(), cfg, gens())
    shared = gens()
    first = canvas()
    first.window = (0, 5)
    part = spec(model, first, cfg, shared)
    assert (part.tokens == model.mask_id).sum(1).tolist() == [16 - 5, 16 - 5]
    second = canvas()
    second.tokens[:, second.gen_slice] = part.tokens
    second.window = (5, 16)
    rest = spec(model, second, cfg, shared)
    assert torch.equal(rest.tokens, whole.tokens)
    assert torch.equal(torch.maximum(part.commit_step, rest.commit_step), whole.commit_step)
    assert part.nfe.tolist() == [5, 5] and rest.nfe.tolist() == [11, 11]


def _fixture_items(engine):
    from dare.harness import config, prompts
    from dare.harness.data import load_samples

    bench = config.benchmark("sudoku")
    template = prompts.template(bench.prompt)
    return [Item(s.id, template.render(s)) for s in load_samples(bench.data)[:2]]


@pytest.mark.parametrize("case", FIXTURE["rollout"]["cases"], ids=lambda c: f"steps{c['steps']}-s{c['contraction']}")
def test_tree_nodes_are_dares_at_temperature_0(case):
    """Every node canvas of both prompts' trees equals DTreeRPORollout.generate_sequences's on the same network
    (steps 16, blocks of 4 steps, branch points 5 and 10 fall inside blocks)."""
    from dare.harness import config
    from tests.backends.strategy_model import noisy_tiny_llada

    engine = TorchEngine(EngineContext(model_name="tiny-llada", model_spec=config.model("tiny-llada"), device="cpu"))
    engine.use_model(noisy_tiny_llada())
    items = _fixture_items(engine)
    assert [engine.prompt_ids(it.messages) for it in items] == case["prompt_ids"]
    decoding = DecodingConfig(gen_length=case["gen_length"], steps=case["steps"], block_length=case["block_length"],
                              temperature=0.0, batch_size=8)
    batch, gens = tree_rollout(engine, items, decoding, 0, case["trees"], case["branch"], case["contraction"])
    tree = batch.extras["tree"]
    assert tree.parents == case["parents"]
    expected = torch.tensor(case["node_states"])  # (prompt, node, gen)
    assert torch.equal(batch.completion_ids, expected[tree.prompt, tree.child])
    assert torch.equal(tree.parent_ids, expected[tree.prompt, torch.tensor(tree.parents)[tree.child]])
    assert [g.token_ids for g in gens] == expected[:, tree.leaves].flatten(0, 1).tolist()
    assert all(g.nfe == case["steps"] for g in gens)


def test_trees_are_seeded_per_edge_and_count_what_each_edge_decoded(tiny):
    engine = TorchEngine(EngineContext(model_name="tiny", model_path=tiny["llada"], device="cpu"))
    items = [Item("p0", (Message(role="user", content="hello"),)), Item("p1", (Message(role="user", content="x y"),))]
    decoding = DecodingConfig(gen_length=8, steps=8, block_length=4, temperature=1.0, batch_size=16)
    batch, gens = tree_rollout(engine, items, decoding, 7, 2, 3, 2, trajectory=True)
    again, _ = tree_rollout(engine, items, decoding, 7, 2, 3, 2)
    other, _ = tree_rollout(engine, items, decoding, 8, 2, 3, 2)
    assert torch.equal(batch.completion_ids, again.completion_ids)
    assert not torch.equal(batch.completion_ids, other.completion_ids)
    assert batch.size == 2 * 8 and len(gens) == 2 * 6  # 2 + 6 edges and 6 leaves per prompt
    mask = engine.model.mask_id
    parent = batch.extras["tree"].parent_ids
    decoded = (parent == mask) & (batch.completion_ids != mask)
    assert not (batch.completion_mask & ~decoded).any()  # parent masked, child not
    assert ((batch.commit_step >= 0) == decoded).all()  # each edge's own commits, at steps 0..3 or 4..7
    first_level = batch.extras["tree"].child <= 2
    later = batch.commit_step[~first_level]
    assert batch.commit_step[first_level].max() <= 3 and (later[decoded[~first_level]] >= 4).all()
    leaves = batch.completion_ids[~first_level]
    assert len({tuple(r.tolist()) for r in leaves}) > 1  # siblings branch apart at T > 0


def test_a_threshold_decoder_cannot_be_branched(tiny):
    engine = TorchEngine(EngineContext(model_name="tiny", model_path=tiny["llada"], device="cpu"))
    items = [Item("p0", (Message(role="user", content="hello"),))]
    decoding = DecodingConfig(gen_length=8, steps=8, block_length=4, threshold=0.9)
    with pytest.raises(ConfigError, match="fixed-step schedule"):
        tree_rollout(engine, items, decoding, 0, 2, 2, 2)
