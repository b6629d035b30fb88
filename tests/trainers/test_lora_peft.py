"""``lora_backend: peft``: the same layers, adapters, forward, loss and gradients as the builtin LoRA; the base
model bit-exactly with adapters off; merged checkpoints; a loadable peft adapter; exact resume; and a
one-line error without peft."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from dare.backends.models.loader import load_model
from dare.harness.models import resolve
from dare.trainers.cli import main
from dare.trainers.training.config import TrainConfig
from dare.trainers.training.trainer import LocalTrainer, Timer, accumulate_gradients

from .test_train_cli import FAST, digits_suite  # noqa: F401  (fixture)

pytestmark = pytest.mark.extended  # training runs of 10-20 s on 2 cores: run with -m extended

peft = pytest.importorskip("peft")

SHIPPED = {"llada": "tiny-llada", "sdar": "tiny-sdar"}
SFT_PEFT = ["--algo", "sft", "--model", "tiny-sdar", "--suite", "sudoku", "--set", "lora_rank=4",
            "--set", "lora_backend=peft", "--no-eval", "--set", "prompts_per_step=2", "--set", "micro_batch_size=1",
            "--set", "lr=1e-2"]


def _trainer(tmp_path: Path, model: str, backend: str) -> LocalTrainer:
    config = TrainConfig(algorithm="sft", suite="sudoku", model=model, steps=1, prompts_per_step=1,
                         micro_batch_size=1, lora_rank=4, lora_alpha=8.0, lora_backend=backend, evaluate=False,
                         device="cpu")
    return LocalTrainer(config, tmp_path / backend)


def _peft_name(builtin_name: str) -> str:
    """``layers.0.attn.q.lora_a`` -> ``layers.0.attn.q.lora_A.default.weight``."""
    owner, _, leaf = builtin_name.rpartition(".")
    return f"{owner}.{leaf[:-1]}{leaf[-1].upper()}.default.weight"


def _logits(net, ids: torch.Tensor) -> torch.Tensor:
    return net(ids, torch.arange(ids.shape[1]).expand_as(ids), None)


def _sft_loss_and_grads(trainer: LocalTrainer) -> tuple[float, dict[str, torch.Tensor]]:
    """One SFT step's loss and adapter gradients (batch and noise depend only on seed and step)."""
    batch = trainer._batch(0, Timer(), {}).to(trainer.batch_device)
    batch.noise = trainer.algorithm.draw_noise(trainer.estimator, batch, torch.Generator().manual_seed(3))
    total, stats = accumulate_gradients(trainer.algorithm, trainer.policy, batch, 1, 0)
    grads = {n: p.grad / total for n, p in trainer.policy.net.named_parameters() if p.grad is not None}
    return stats["loss"] / total, grads


@pytest.mark.parametrize("arch", ["llada", "sdar"])
def test_peft_matches_builtin_lora_in_layers_forward_loss_and_grads(tmp_path, arch):
    builtin, via_peft = _trainer(tmp_path, SHIPPED[arch], "builtin"), _trainer(tmp_path, SHIPPED[arch], "peft")
    adapters = builtin.lora.adapter_state(builtin.policy.net)
    peft_adapters = via_peft.lora.adapter_state(via_peft.policy.net)
    assert sorted(_peft_name(n) for n in adapters) == sorted(peft_adapters)  # the very same layers
    for name, value in adapters.items():  # same seed, same initial adapters (B = 0, A drawn alike)
        assert torch.equal(peft_adapters[_peft_name(name)], value)
    generator = torch.Generator().manual_seed(1)
    trained = {n: v + 0.05 * torch.randn(v.shape, generator=generator) for n, v in adapters.items()}
    builtin.lora.load_adapter_state(builtin.policy.net, trained)
    via_peft.lora.load_adapter_state(via_peft.policy.net, {_peft_name(n): v for n, v in trained.items()})

    ids = torch.randint(0, 250, (2, 12), generator=generator)
    with torch.no_grad():
        adapted = _logits(builtin.policy.net, ids)
        assert not torch.allclose(adapted, _logits(load_model(resolve(SHIPPED[arch], None).path).net, ids))
        torch.testing.assert_close(_logits(via_peft.policy.net, ids), adapted, rtol=1e-6, atol=1e-6)

    loss_builtin, grads_builtin = _sft_loss_and_grads(builtin)
    loss_peft, grads_peft = _sft_loss_and_grads(via_peft)
    assert loss_peft == pytest.approx(loss_builtin, rel=1e-6, abs=1e-6)
    assert sorted(grads_peft) == sorted(_peft_name(n) for n in grads_builtin)
    for name, grad in grads_builtin.items():
        torch.testing.assert_close(grads_peft[_peft_name(name)], grad, rtol=1e-5, atol=1e-6)


def test_peft_disabled_adapters_are_the_base_model_and_merged_weights_are_w_plus_scaled_ba(tmp_path):
    trainer = _trainer(tmp_path, "tiny-llada", "peft")
    net, lora = trainer.policy.net, trainer.lora
    base = load_model(trainer.base_path)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, param in net.named_parameters():
            if ".lora_" in name:
                param.add_(0.1 * torch.randn(param.shape, generator=generator))
    ids = torch.randint(0, 250, (2, 10), generator=generator)
    with torch.no_grad():
        reference = _logits(base.net, ids)
        assert not torch.allclose(_logits(net, ids), reference)
        with lora.disabled(net):
            assert torch.equal(_logits(net, ids), reference)
        adapted = _logits(net, ids)
    assert all(p.requires_grad for n, p in net.named_parameters() if ".lora_" in n)  # trainable again

    merged, base_state = lora.merged_state(net), base.net.state_dict()
    assert sorted(merged) == sorted(base_state)
    layers = dict(lora.layers(net))
    assert len(layers) == 7 * len(net.layers)  # q, k, v, o, gate, up, down in each layer
    for name, value in merged.items():
        owner = name.removesuffix(".weight")
        if owner in layers:
            down, up = layers[owner].lora_A["default"].weight, layers[owner].lora_B["default"].weight
            torch.testing.assert_close(value, base_state[name] + 8.0 / 4 * (up @ down), rtol=0, atol=1e-6)
        else:
            assert torch.equal(value, base_state[name])
    base.net.load_state_dict(merged)
    with torch.no_grad():
        torch.testing.assert_close(_logits(base.net, ids), adapted, rtol=1e-4, atol=1e-4)  # merge rounding


def _adapter_tensors(checkpoint: Path) -> dict[str, torch.Tensor]:
    return torch.load(checkpoint / "trainer_state.pt", map_location="cpu", weights_only=False)["lora"]


def test_peft_run_writes_a_loadable_adapter_and_resumes_exactly(tmp_path):
    run = "sft-sudoku-tiny-sdar-s0"
    assert main([*SFT_PEFT, "--out", str(tmp_path / "a"), "--steps", "2"]) == 0
    assert main([*SFT_PEFT, "--out", str(tmp_path / "b"), "--steps", "1"]) == 0  # killed after step 1
    assert main([*SFT_PEFT, "--out", str(tmp_path / "b"), "--steps", "2"]) == 0  # rerun: resumes
    rows = {k: [json.loads(x) for x in (tmp_path / k / run / "metrics.jsonl").read_text().splitlines()] for k in "ab"}
    assert [r["step"] for r in rows["b"]] == [1, 2] and all(r["grad_norm"] > 0 for r in rows["a"])
    assert [r["loss"] for r in rows["a"]] == [r["loss"] for r in rows["b"]]
    final_a, final_b = (tmp_path / k / run / "checkpoints" / "step-000002" for k in "ab")
    adapters_a, adapters_b = _adapter_tensors(final_a), _adapter_tensors(final_b)
    assert adapters_a and sorted(adapters_a) == sorted(adapters_b)
    assert all(torch.equal(adapters_a[k], adapters_b[k]) for k in adapters_a)
    assert any(adapters_a[k].abs().sum() > 0 for k in adapters_a if ".lora_B." in k)  # trained away from B = 0

    adapter_dir = final_a / "peft_adapter"
    assert json.loads((adapter_dir / "adapter_config.json").read_text())["peft_type"] == "LORA"
    assert not list(final_a.glob("adapter_*"))  # engines reading the top level see only merged weights
    base_path = resolve("tiny-sdar", None).path
    with_adapter = peft.PeftModel.from_pretrained(load_model(base_path).net, str(adapter_dir))
    ids = torch.randint(0, 250, (1, 16), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        merged_checkpoint = _logits(load_model(final_a).net, ids)
        torch.testing.assert_close(_logits(with_adapter, ids), merged_checkpoint, rtol=1e-4, atol=1e-4)
        assert not torch.allclose(_logits(load_model(base_path).net, ids), merged_checkpoint)


def test_a_peft_rl_run_follows_the_builtin_run_with_the_disabled_adapters_as_reference(tiny, tmp_path,
                                                                                     digits_suite):  # noqa: F811
    """Same seed, same initial adapters: d1 (KL to the reference) gives the builtin run's losses."""
    common = ["--algo", "d1", "--model-path", str(tiny["llada"]), "--suite", digits_suite, *FAST,
              "--set", "lora_rank=4", "--set", "algo.inner_steps=2", "--set", "rollout.temperature=1.0"]
    rows = {}
    for backend in ("builtin", "peft"):
        assert main([*common, "--out", str(tmp_path / backend), "--set", f"lora_backend={backend}"]) == 0
        metrics = tmp_path / backend / f"d1-{digits_suite}-llada-s0" / "metrics.jsonl"
        rows[backend] = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert rows["peft"][0]["first_inner_kl_ref"] == 0.0  # policy == reference before any update (B = 0)
    assert rows["peft"][1]["first_inner_kl_ref"] > 0  # step 2: the trained policy against the base model
    for peft_row, builtin_row in zip(rows["peft"], rows["builtin"], strict=True):
        assert peft_row["reward"] == builtin_row["reward"]  # identical rollouts
        for key in ("loss", "kl_ref", "first_inner_kl_ref", "grad_norm"):
            assert peft_row[key] == pytest.approx(builtin_row[key], rel=1e-5, abs=1e-7), key


def test_peft_backend_without_peft_is_a_one_line_config_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "peft", None)  # what an environment without the extra looks like
    assert main([*SFT_PEFT, "--out", str(tmp_path), "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install 'dare-dllm[train]'" in err, err
    assert not (tmp_path / "sft-sudoku-tiny-sdar-s0" / "checkpoints").exists()
