"""PEFT / LoRA: starts at the base model, trains only adapters, base restored bit-exactly when disabled,
merged checkpoints equal the adapted model."""

from __future__ import annotations

import json

import torch

from dare.backends.models.loader import load_model
from dare.trainers.cli import main
from dare.trainers.lora.builtin import adapters_disabled, apply_lora, plain_state

from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)


def _forward(net, ids):
    pos = torch.arange(ids.shape[1]).expand_as(ids)
    return net(ids, pos, None)


def test_lora_starts_at_the_base_model_and_trains_only_adapters(tiny):
    loaded = load_model(tiny["llada"])
    ids = torch.randint(0, 250, (2, 9))
    base = _forward(loaded.net, ids)
    wrapped = apply_lora(loaded.net, rank=2, alpha=4.0)
    assert len(wrapped) == 2 * 7  # q, k, v, o, gate, up, down in each of 2 layers
    assert torch.equal(_forward(loaded.net, ids), base)  # B = 0
    _forward(loaded.net, ids).square().mean().backward()
    grads = {n for n, p in loaded.net.named_parameters() if p.grad is not None}
    assert grads and all(".lora_" in n for n in grads)
    with torch.no_grad():
        for n, p in loaded.net.named_parameters():
            if ".lora_b" in n:
                p.add_(0.05)
    adapted = _forward(loaded.net, ids)
    assert not torch.allclose(adapted, base)
    with adapters_disabled(loaded.net):
        assert torch.equal(_forward(loaded.net, ids), base)
    # merged weights under the base names reproduce the adapted model
    plain = load_model(tiny["llada"])
    plain.net.load_state_dict(plain_state(loaded.net))
    assert torch.allclose(_forward(plain.net, ids), adapted, atol=1e-5)


def test_lora_run_trains_resumes_and_uses_the_disabled_adapters_as_reference(tiny, tmp_path, digits_suite):  # noqa: F811
    common = ["--algo", "d1", "--model-path", str(tiny["llada"]), "--suite", digits_suite, *FAST,
              "--set", "lora_rank=4", "--set", "algo.inner_steps=2", "--set", "rollout.temperature=1.0"]
    assert main([*common, "--out", str(tmp_path / "a"), "--steps", "2"]) == 0
    assert main([*common, "--out", str(tmp_path / "b"), "--steps", "1"]) == 0
    assert main([*common, "--out", str(tmp_path / "b"), "--steps", "2"]) == 0
    run = f"d1-{digits_suite}-llada-s0"
    rows_a = [json.loads(x) for x in (tmp_path / "a" / run / "metrics.jsonl").read_text().splitlines()]
    rows_b = [json.loads(x) for x in (tmp_path / "b" / run / "metrics.jsonl").read_text().splitlines()]
    assert rows_a[0]["first_inner_kl_ref"] == 0.0  # policy == reference before any update (B = 0)
    assert [r["loss"] for r in rows_a] == [r["loss"] for r in rows_b]
    final = load_model(tmp_path / "a" / run / "checkpoints" / "step-000002")
    base = load_model(tiny["llada"])
    ids = torch.randint(0, 250, (1, 6))
    assert not torch.equal(_forward(final.net, ids), _forward(base.net, ids))
