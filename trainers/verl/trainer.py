"""``VerlTrainer``: the local trainer's fit loop with every model computation on a verl worker group.

The driver (single controller) holds no weights (:mod:`.weightless`): it keeps data order, request seeds,
rewards (the suite's verifiers, cheap and on CPU), estimator noise, advantages (the plugin's
``advantages``), the learning-rate schedule, metrics and checkpoints. The workers (``DareWorker``, one per
device, FSDP2) run, each on a contiguous chunk of the rows (``Dispatch.DP_COMPUTE_PROTO``):

    generate      rollout with the evaluation's engine + DecodingConfig on the sharded policy itself
    compute_logp  old log-probs (policy) and reference log-probs (a sharded frozen base model)
    update        the plugin's ``loss``, ``inner_steps`` optimizer updates

There is no per-step weight transfer: the workers' rollout engine decodes with the updated module. Weights
and optimizer moments are gathered to the driver only when a checkpoint is written. Same data, seed and
settings give the local trainer's rollouts, losses and parameters.
"""

from __future__ import annotations

import copy
import logging
import warnings
from pathlib import Path

import torch

from dare.harness import stopping
from dare.harness.errors import ConfigError
from dare.harness.registry import algorithms
from dare.harness.worker_pool import WorkerDiedError

from ..api import Algorithm
from ..batch import RolloutBatch
from ..state import RESUME_TRAINING
from ..state import checkpoint as ckpt
from ..training.config import TrainConfig, resolve_algorithm
from ..training.rollout import batch_from_generations, rollout_requests
from ..training.trainer import MAX_SKIPPED_UPDATES, LocalTrainer, TrainingError
from . import recovery
from .dataproto import object_array, to_dataproto
from .launch import Placement, start_worker_group, stop_worker_group
from .weightless import materialise, release, weightless_model

log = logging.getLogger(__name__)


class VerlTrainer(LocalTrainer):
    """LocalTrainer whose rollout, log-probs and updates run on ``placement.world_size`` verl workers."""

    def __init__(self, config: TrainConfig, run_dir: Path, placement: Placement | None = None):
        if config.lora_rank:
            raise ConfigError("--engine verl does not support LoRA yet; drop lora_rank or use the local trainer")
        if config.rollout_dtype and config.rollout_dtype != config.dtype:
            raise ConfigError("--engine verl rolls out with the trained weights themselves; drop rollout_dtype")
        if algorithms.get(resolve_algorithm(config.algorithm, config.algorithm_settings)[0]).rollout \
                is not Algorithm.rollout:  # before anything loads
            raise ConfigError(f"--engine verl cannot run {config.algorithm!r}: its own rollout (d-TreeRPO's trees) "
                              "continues partial canvases on the driver, which holds no weights under verl; use the "
                              "local trainer")
        resume = ckpt.latest(run_dir)
        self.placement = placement or Placement()
        super().__init__(config, run_dir)
        if type(self.algorithm).prepare is not Algorithm.prepare:  # MDPO: forwards on the driver's policy
            raise ConfigError(f"--engine verl cannot run {config.algorithm!r} yet: its prepare stage needs the policy "
                              "on the driver, which holds no weights under verl; use the local trainer")
        rows = config.prompts_per_step * (config.group_size if self.needs.rollout else 1)
        if rows % self.placement.world_size:
            raise ConfigError(f"a step has {rows} rows, not divisible by {self.placement.world_size} workers; "
                              "change prompts_per_step / group_size or the number of workers")
        # the optimizer's own (weightless) parameter objects by name: checkpoints pack its state by them
        self.optimizer_params = {n: p for n, p in self.policy.named_parameters() if p.requires_grad}
        self.restarts, self.group = 0, None
        self._fresh_schedule = copy.deepcopy(self.scheduler.state_dict())  # a restart before any checkpoint
        try:
            self._start_group(resume)
        except WorkerDiedError as died:  # before any work: nothing to restart from, nothing lost
            stop_worker_group(self.group)
            raise WorkerDiedError(f"{died.args[0]}; {RESUME_TRAINING}") from None

    def _start_group(self, checkpoint: Path | None) -> None:
        """A worker group holding ``checkpoint``'s weights and AdamW moments (the base model when None)."""
        self.group = start_worker_group(self.placement, {"device": self.placement.device})
        self.worker_memory = None
        self.worker_info = self._call("start-up", "init_model", self._worker_spec(checkpoint or self.base_path))
        self.worker_memory = [info["memory"] for info in self.worker_info]
        if checkpoint is not None:
            self._call("start-up", "load_optimizer_state", self._saved_optimizer_state(checkpoint))

    # ------------------------------------------------------------ driver side holds no weights
    def _engine(self, engine_cls, path: Path, device: str, dtype: str):
        """The evaluation engine, for its prompt rendering only: its model is weightless on the driver."""
        engine = super()._engine(engine_cls, path, device, dtype)
        spec = self.spec
        engine.use_model(weightless_model(engine.path, engine.arch.name, mask_id=spec.mask_id if spec else None,
                                          eos_id=spec.eos_id if spec else None,
                                          stop_tokens=spec.stop_tokens if spec else ()))
        return engine

    def _decodings(self):
        """Rollout batches default to one rank's share of the rows: the batches each rank really decodes.

        The decoded tokens can depend on the batch around a request (floating-point rounding of batched
        matmuls flips near-tied samples; measured on tiny SDAR), so ``batch_size`` is part of the
        DecodingConfig; the local trainer with the same ``rollout.batch_size`` reproduces these rollouts."""
        evaluation, rollout = super()._decodings()
        if "batch_size" in self.config.rollout_decoding:
            return evaluation, rollout
        share = max(rollout.batch_size // self.placement.world_size, 1)
        return evaluation, rollout.model_copy(update={"batch_size": share})

    def _load_reference(self, loaded, device: str):
        return weightless_model(self.base_path, loaded.arch.name, mask_id=loaded.mask_id, eos_id=loaded.eos_id)

    @property
    def batch_device(self) -> torch.device:
        return torch.device("cpu")

    def _worker_spec(self, path: Path) -> dict:
        cfg = self.config
        name, settings = resolve_algorithm(cfg.algorithm, cfg.algorithm_settings)
        return dict(path=str(path), engine=cfg.engine, model_name=self.model_name, model_spec=self.spec,
                    trajectory=self.needs.trajectory, dtype=cfg.dtype, block=self.policy.block_size,
                    chunk_size=cfg.chunk_size, packed=cfg.packed, kernel=getattr(self.policy, "kernel", None),
                    reference=str(self.base_path) if self.reference is not None else None,
                    algorithm=name, settings=settings, lr=cfg.lr, betas=list(cfg.betas),
                    weight_decay=cfg.weight_decay, micro_batch_size=cfg.micro_batch_size, grad_clip=cfg.grad_clip)

    def _saved_optimizer_state(self, checkpoint: Path) -> dict[str, dict]:
        """The checkpoint's AdamW state keyed by parameter name (it is packed in ``optimizer_params`` order)."""
        saved = ckpt.load_state(checkpoint)["optimizer"]
        order = [i for group in saved["param_groups"] for i in group["params"]]
        return {name: saved["state"].get(i, {}) for name, i in zip(self.optimizer_params, order)}

    def _call(self, stage: str, method: str, *args):
        return recovery.call(self.group, stage, method, *args, memory=self.worker_memory)

    # ------------------------------------------------------------ stages on the workers
    def _rollout(self, items, seed: int, count_padding: bool):
        from verl import DataProto

        decoding = self.rollout_decoding
        requests = rollout_requests(items, decoding, seed)
        data = DataProto.from_dict(tensors={"row": torch.arange(len(requests))},
                                   non_tensors={"request": object_array(requests)}, meta_info={"decoding": decoding})
        out = self._call("rollout", "generate", data)
        gens = list(out.non_tensor_batch["generation"])
        self.rollout_forwards = out.meta_info["metrics"]["rollout_forwards"]  # per rank
        batch = batch_from_generations(self.engine, items, decoding, gens, count_padding, self.needs.trajectory)
        return batch, gens

    def _logp(self, policy, batch: RolloutBatch) -> torch.Tensor:
        """(S, B, T) from the workers: ``policy`` is the driver's weightless policy or reference."""
        which = "ref" if policy is self.reference else "old"
        out = self._call(f"{which} log-probs", "compute_logp", to_dataproto(batch, {"which": which}))
        return out.batch["logp"].transpose(0, 1)

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
        out = self._call("an update", "update", to_dataproto(batch, {"lrs": self._next_lrs()}))
        metrics = out.meta_info["metrics"]  # every rank returns the same all-reduced values
        metrics = {k: v[0] for k, v in metrics.items()} if isinstance(metrics, dict) else metrics[0]
        skipped, inner = int(metrics.get("skipped_nonfinite", 0)), self.algorithm.config.inner_steps
        self._skipped = self._skipped + skipped if skipped == inner else 0  # the workers skipped every update
        if self._skipped >= MAX_SKIPPED_UPDATES:
            raise TrainingError(f"step {self._step + 1}: {self._skipped} consecutive updates had a non-finite "
                                "loss or gradient; lower lr or check the algorithm's settings")
        return metrics

    # ------------------------------------------------------------ checkpoints
    def step(self, step: int) -> dict:
        release(self.policy.net)  # the weights gathered for the previous checkpoint
        row = super().step(step)
        self.worker_memory = self._call("a memory report", "memory")  # names a later death out of memory
        return row

    def _save(self, step: int) -> Path:
        self.gather_for_checkpoint()  # every checkpoint, the scheduled ones and a stop's
        return super()._save(step)

    def gather_for_checkpoint(self) -> None:
        """Weights and AdamW moments from the workers into the driver's model and optimizer (collectives)."""
        materialise(self.policy.net, self._call("a checkpoint", "full_state")[0])
        state = self._call("a checkpoint", "full_optimizer_state")[0]
        for name, param in self.optimizer_params.items():
            if name in state:
                self.optimizer.state[param] = dict(state[name])

    def train(self) -> Path | None:
        """The local fit loop; a dead worker replaces the group and reruns the steps since the last checkpoint
        (:mod:`.recovery`), up to ``worker_restarts`` times (a death while the new group starts counts too)."""
        try:
            while True:
                try:
                    if self.group is None:
                        self._start_group(ckpt.latest(self.run_dir))
                    return super().train()
                except WorkerDiedError as died:
                    if stopping.requested():  # a scheduler's SIGTERM to the whole job ends the workers too
                        raise stopping.dropped(f"{died.args[0]}, so step {self._step + 1} was dropped") from None
                    if self.restarts >= self.config.worker_restarts:
                        raise recovery.over_budget(died, self.restarts, self.config.worker_restarts) from None
                    self._rewind(died)
        finally:
            if self.group is not None:
                stop_worker_group(self.group)

    def _rewind(self, died: WorkerDiedError) -> None:
        """Stop the group and take the driver (schedule, metrics, step) back to the last checkpoint."""
        self.restarts += 1
        in_flight, checkpoint = self._step + 1, ckpt.latest(self.run_dir)
        log.warning("%s; restarting the worker group from %s (restart %d of %d)", died.args[0],
                    checkpoint.name if checkpoint else "the base model", self.restarts, self.config.worker_restarts)
        stop_worker_group(self.group)
        self.group = None
        state = ckpt.load_state(checkpoint) if checkpoint is not None else None
        self.start_step = state["step"] if state else 0
        self.scheduler.load_state_dict(state["scheduler"] if state else self._fresh_schedule)
        self.metrics.truncate(self.start_step)
        self._step, self._skipped = self.start_step, 0
        recovery.record(self.run_dir, {"restart": self.restarts, "budget": self.config.worker_restarts,
                                       "step_in_flight": in_flight, "resumed_from_step": self.start_step,
                                       "cause": died.args[0]})


def build(config: TrainConfig, run_dir: Path, nnodes: int | None = None,
          gpus_per_node: int | None = None) -> VerlTrainer:
    """``dare-train --engine verl``: one worker per GPU of ``nnodes`` nodes, or 2 CPU workers locally."""
    device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
    device = "cuda" if device.startswith("cuda") else "cpu"
    per_node = gpus_per_node or (torch.cuda.device_count() if device == "cuda" else 2)
    if (nnodes or 1) < 1 or per_node < 1:
        raise ConfigError("--nnodes and --gpus-per-node must be at least 1")
    # "verl" names the training engine; the workers roll out with evaluation's in-process engine for the device
    config = config.model_copy(update={"engine": "fastdllm" if device == "cuda" else "torch"})
    return VerlTrainer(config, run_dir, Placement(nnodes or 1, per_node, device))
