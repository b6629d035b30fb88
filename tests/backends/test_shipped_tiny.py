"""The tiny checkpoints shipped under configs/models load through their ModelSpec and decode; the random ones
are exactly what :func:`dare.backends.models.tiny.write_shipped` produces (so they can be rebuilt from code),
the trained ones carry the recipe and log they were trained with."""

from __future__ import annotations

import pytest

from dare.backends.engines.torch import TorchEngine
from dare.backends.models.loader import fingerprint
from dare.backends.models.tiny import SHIPPED, write_shipped
from dare.backends.models.tiny_planning import TRAINED

ALL = {**SHIPPED, **{name: arch for name, (arch, _) in TRAINED.items()}}
from dare.harness import config
from dare.harness.engine import EngineContext, GenerationRequest
from dare.harness.records import Message


@pytest.mark.parametrize("name", sorted(ALL))
def test_shipped_tiny_model_decodes_with_its_spec(name):
    spec = config.model(name)
    engine = TorchEngine(EngineContext(model_name=name, model_spec=spec))
    small = {"gen_length": 8, "steps": 8, "block_length": 4 if "sdar" in name else 8}
    decoding = config.decoding_with_overrides(spec.decoding_for("planning"), small)
    request = GenerationRequest(sample_id="a", index=0, messages=(Message(role="user", content="1+1?"),), seed=0)
    engine.prepare([request], decoding)
    (out,) = engine.generate([request], decoding)
    assert len(out.token_ids) == 8 and engine.model_info().architecture == ALL[name]


def test_shipped_checkpoints_are_reproducible(tmp_path):
    write_shipped(tmp_path)
    for name in SHIPPED:
        assert fingerprint(tmp_path / name)[0] == fingerprint(config.SHIPPED_CONFIGS / "models" / name)[0], name


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_trained_tiny_models_carry_recipe_and_log(name):
    import json

    root = config.SHIPPED_CONFIGS / "models" / name
    recipe = json.loads((root / "training_config.json").read_text())["config"]
    log = [json.loads(line) for line in (root / "training_log.jsonl").read_text().splitlines()]
    assert recipe["algorithm"] == "sft" and len(log) == recipe["steps"]
    assert [row["step"] for row in log] == list(range(1, recipe["steps"] + 1))
    assert log[-1]["loss"] < log[0]["loss"] / 5  # it learned (the accuracy is in README and the model YAML)
