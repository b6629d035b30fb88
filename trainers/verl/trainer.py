"""``VerlTrainer``: the local trainer's fit loop with the optimizer updates on a verl worker group.

The driver (single controller) keeps the stages that need no gradients: data order, rollout with the
suite's decoding, rewards, estimator noise, old / reference log-probs and advantages (the algorithm
plugin's ``advantages``), all identical to :class:`~dare.trainers.trainer.LocalTrainer`. The batch then
travels as a ``DataProto`` to ``DareWorker.update`` (``Dispatch.DP_COMPUTE_PROTO``: one contiguous chunk
per rank), where the plugin's ``loss`` runs on an FSDP2-sharded policy; afterwards the updated weights
are gathered (``full_state``) into the driver's copy, which rolls out the next step and is what the
checkpoints hold. Same data, seed and settings give the local trainer's losses and parameters.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import torch

from dare.harness.errors import ConfigError
from dare.harness.parallel import WorkerDiedError

from .. import checkpoint as ckpt
from ..batch import RolloutBatch
from ..config import TrainConfig, resolve_algorithm
from ..trainer import LocalTrainer
from .dataproto import to_dataproto
from .launch import Placement, start_worker_group, stop_worker_group

log = logging.getLogger(__name__)


class VerlTrainer(LocalTrainer):
    """LocalTrainer whose ``_update`` runs on ``placement.world_size`` verl workers."""

    def __init__(self, config: TrainConfig, run_dir: Path, placement: Placement | None = None):
        if config.lora_rank:
            raise ConfigError("--engine verl does not support LoRA yet; drop lora_rank or use the local trainer")
        if config.rollout_dtype and config.rollout_dtype != config.dtype:
            raise ConfigError("--engine verl keeps one weight copy on the driver; drop rollout_dtype")
        resume = ckpt.latest(run_dir)
        super().__init__(config, run_dir)
        if self.config.engine != "torch":
            raise ConfigError(f"--engine verl rolls out with the torch engine, not {self.config.engine!r}")
        self.placement = placement or Placement()
        rows = config.prompts_per_step * (config.group_size if self.needs.rollout else 1)
        if rows % self.placement.world_size:
            raise ConfigError(f"a step has {rows} rows, not divisible by {self.placement.world_size} workers; "
                              "change prompts_per_step / group_size or the number of workers")
        self.group = start_worker_group(self.placement, {"device": self.placement.device})
        self.worker_info = self.group.init_model(self._worker_spec(resume or self.base_path))
        if resume is not None:  # the checkpoint's optimizer state was loaded into the driver's optimizer
            named = [(n, p) for n, p in self.policy.named_parameters() if p.requires_grad]
            self.group.load_optimizer_state({n: dict(self.optimizer.state.get(p, {})) for n, p in named})

    def _worker_spec(self, path: Path) -> dict:
        loaded, cfg = self.policy.loaded, self.config
        name, settings = resolve_algorithm(cfg.algorithm, cfg.algorithm_settings)
        return dict(path=str(path), arch=loaded.arch.name, mask_id=loaded.mask_id, eos_id=loaded.eos_id,
                    dtype=cfg.dtype, block=self.policy.block_size, chunk_size=cfg.chunk_size, packed=cfg.packed,
                    algorithm=name, settings=settings, lr=cfg.lr, betas=list(cfg.betas),
                    weight_decay=cfg.weight_decay, micro_batch_size=cfg.micro_batch_size, grad_clip=cfg.grad_clip)

    def _next_lrs(self) -> list[float]:
        """The learning rate of each of this step's updates; the driver's scheduler keeps the count."""
        lrs = []
        with warnings.catch_warnings():  # the driver's optimizer never steps: only its schedule advances
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(self.algorithm.config.inner_steps):
                lrs.append(self.scheduler.get_last_lr()[0])
                self.scheduler.step()
        return lrs

    def _update(self, batch: RolloutBatch) -> dict[str, float]:
        import ray

        data = to_dataproto(batch, {"lrs": self._next_lrs()})
        try:
            out = self.group.update(data)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as exc:
            raise WorkerDiedError(f"a verl training worker died during an update ({type(exc).__name__}); rerun "
                                  "the same command to resume from the last checkpoint") from None
        metrics = out.meta_info["metrics"]  # every rank returns the same all-reduced values
        metrics = {k: v[0] for k, v in metrics.items()} if isinstance(metrics, dict) else metrics[0]
        self.sync_weights()
        return metrics

    def step(self, step: int) -> dict:
        row = super().step(step)
        if (step + 1) % self.config.save_every == 0 or step + 1 == self.config.steps:
            # the checkpoint written next holds the driver's optimizer: give it the workers' moments
            state = self.group.full_optimizer_state()[0]
            for name, param in self.policy.named_parameters():
                if name in state:
                    self.optimizer.state[param] = {k: v.to(param.device) if torch.is_tensor(v) and k != "step" else v
                                                   for k, v in state[name].items()}
        return row

    def sync_weights(self) -> None:
        """Gather the workers' updated parameters into the driver's copy (rollout + checkpoints)."""
        state = self.group.full_state()[0]
        self.policy.net.load_state_dict({k: v.to(self.policy.device) for k, v in state.items()})

    def train(self) -> Path | None:
        try:
            return super().train()
        finally:
            stop_worker_group(self.group)


def build(config: TrainConfig, run_dir: Path, nnodes: int | None = None, gpus_per_node: int | None = None) -> VerlTrainer:
    """``dare-train --engine verl``: one worker per GPU of ``nnodes`` nodes, or 2 CPU workers locally."""
    device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
    device = "cuda" if device.startswith("cuda") else "cpu"
    per_node = gpus_per_node or (torch.cuda.device_count() if device == "cuda" else 2)
    if (nnodes or 1) < 1 or per_node < 1:
        raise ConfigError("--nnodes and --gpus-per-node must be at least 1")
    # rollouts stay on the torch engine; "verl" names the training engine, not a rollout engine
    config = config.model_copy(update={"engine": "torch"})
    return VerlTrainer(config, run_dir, Placement(nnodes or 1, per_node, device))
