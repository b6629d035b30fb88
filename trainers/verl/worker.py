"""``DareWorker``: one verl single-controller worker per device, holding an FSDP2-sharded policy.

The worker builds the same model, algorithm and estimator as the local trainer (from our registries)
and runs the algorithm plugin's ``loss`` unchanged on its contiguous chunk of the global batch. What
makes N ranks equal one process (``LossOutput.weight`` accumulation, as in the local trainer):

* every rank backpropagates ``sum(loss * weight)`` over its micro-batches;
* the weight total and the metric sums are all-reduced; FSDP2's reduce-scatter averages the block
  gradients over ranks, so they are scaled by ``world / total``; the parameters kept outside the
  sharded blocks (embedding, final norm, LM head: the policy reads ``lm_head.weight`` outside
  ``forward``, where FSDP2 hooks do not run) are replicated and their gradients all-reduced;
* the clipping norm is the global norm over shards and replicated parameters.
"""

from __future__ import annotations

import logging
import math
import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from verl import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register

log = logging.getLogger(__name__)
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}


def _is_dtensor(t: torch.Tensor) -> bool:
    return hasattr(t, "full_tensor") and hasattr(t, "to_local")


class DareWorker(Worker):
    """Actor role: sharded policy + optimizer; ``update`` runs the plugin loss on this rank's rows."""

    def __init__(self, device: str = "cpu", timeout_s: int = 600):
        super().__init__()
        self.device_type = device
        if device == "cpu":
            torch.set_num_threads(1)
        if not dist.is_initialized():  # several roles may share one process
            backend = "cpu:gloo,cuda:nccl" if device == "cuda" else "gloo"
            dist.init_process_group(backend, rank=self.rank, world_size=self.world_size,
                                    timeout=timedelta(seconds=timeout_s))
        if device == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) if torch.cuda.device_count() > 1 else 0)
        self.device = torch.device(device, torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Build policy, algorithm, estimator and optimizer from ``spec`` (see ``VerlTrainer._worker_spec``)."""
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        from dare.backends.models.loader import load_model
        from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms and estimators)
        from dare.trainers.api import build_algorithm
        from dare.trainers.policy import ModelPolicy

        loaded = load_model(spec["path"], spec["arch"], mask_id=spec["mask_id"], eos_id=spec["eos_id"],
                            device=self.device, dtype=_DTYPES[spec["dtype"]])
        loaded.net.requires_grad_(True)
        mesh = init_device_mesh(self.device_type, (self.world_size,))
        for layer in loaded.net.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=True)
        self.policy = ModelPolicy(loaded, spec["block"], spec["chunk_size"], spec["packed"])
        self.algorithm = build_algorithm(spec["algorithm"], spec["settings"])
        self.algorithm.bind(self.policy.attention)
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=spec["lr"], betas=tuple(spec["betas"]),
                                           weight_decay=spec["weight_decay"])
        self.micro_batch_size, self.grad_clip = spec["micro_batch_size"], spec["grad_clip"]
        sharded = sum(p.numel() for p in self.params if _is_dtensor(p))
        return {"rank": self.rank, "pid": os.getpid(), "sharded_params": sharded,
                "replicated_params": sum(p.numel() for p in self.params) - sharded}

    def _all_reduce(self, values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def _finish_grads(self, total: float) -> float:
        """Turn local ``sum(loss * weight)`` gradients into the global mean; clip; return the norm."""
        for p in self.params:
            if p.grad is None:
                continue
            if _is_dtensor(p.grad):
                p.grad.mul_(self.world_size / max(total, 1e-8))  # FSDP2 already averaged over ranks
            else:
                dist.all_reduce(p.grad)
                p.grad.div_(max(total, 1e-8))
        sharded = sum(float(p.grad.to_local().double().pow(2).sum()) for p in self.params
                      if p.grad is not None and _is_dtensor(p.grad))
        replicated = sum(float(p.grad.double().pow(2).sum()) for p in self.params
                         if p.grad is not None and not _is_dtensor(p.grad))
        norm = math.sqrt(self._all_reduce([sharded])[0] + replicated)
        limit = self.grad_clip or float("inf")
        coef = min(1.0, limit / (norm + 1e-6))
        if coef < 1.0:
            for p in self.params:
                if p.grad is not None:
                    p.grad.mul_(coef)
        return norm

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO)
    def update(self, data: DataProto) -> DataProto:
        """``inner_steps`` optimizer updates on this rank's rows; ``meta_info["lrs"]`` gives each update's lr."""
        from ..trainer import accumulate_gradients
        from .dataproto import from_dataproto

        batch = from_dataproto(data, self.device)
        lrs = data.meta_info["lrs"]
        summed: dict[str, float] = {}
        first: dict[str, float] = {}
        for inner, lr in enumerate(lrs):
            self.optimizer.zero_grad(set_to_none=True)
            total, stats = accumulate_gradients(self.algorithm, self.policy, batch, self.micro_batch_size, inner)
            keys = sorted(stats)  # every rank computes the same metric names
            reduced = self._all_reduce([total, *(stats[k] for k in keys)])
            total, stats = reduced[0], {k: v / max(reduced[0], 1e-8) for k, v in zip(keys, reduced[1:])}
            stats["grad_norm"] = self._finish_grads(total)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            if inner == 0:
                first = stats
            for k, v in stats.items():
                summed[k] = summed.get(k, 0.0) + v / len(lrs)
        for key in ("ratio_max_dev", "kl_ref"):
            if key in first:
                summed[f"first_inner_{key}"] = first[key]
        # one row per input row so DataProto.concat can stitch the ranks; metrics are already global
        return DataProto.from_dict(tensors={"rank": torch.full((batch.size,), self.rank)},
                                   meta_info={"metrics": summed})

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def full_state(self) -> dict[str, torch.Tensor] | None:
        """The unsharded state dict on rank 0 (a collective: every rank gathers), None elsewhere."""
        state = {k: (v.full_tensor() if _is_dtensor(v) else v).detach().cpu().clone()
                 for k, v in self.policy.net.state_dict().items()}
        return state if self.rank == 0 else None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def full_optimizer_state(self) -> dict | None:
        """Per-parameter optimizer state keyed by parameter name, unsharded, on rank 0 (a collective).

        Names, not indices: FSDP2 re-registers sharded parameters, so this process's parameter order may
        differ from the driver's unsharded model."""
        out = {}
        for name, param in self._named_params():
            out[name] = {k: (v.full_tensor() if _is_dtensor(v) else v).detach().cpu().clone() if torch.is_tensor(v) else v
                         for k, v in self.optimizer.state.get(param, {}).items()}
        return out if self.rank == 0 else None

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def load_optimizer_state(self, state: dict[str, dict]) -> None:
        """Restore unsharded per-parameter state keyed by name (a resumed checkpoint); each rank keeps its shards."""
        from torch.distributed.tensor import distribute_tensor

        for name, param in self._named_params():
            entry = {}
            for key, value in state.get(name, {}).items():
                if torch.is_tensor(value) and key != "step":
                    value = value.to(self.device, param.dtype)
                    if _is_dtensor(param):
                        value = distribute_tensor(value, param.device_mesh, param.placements)
                entry[key] = value
            if entry:
                self.optimizer.state[param] = entry

    def _named_params(self):
        return [(n, p) for n, p in self.policy.named_parameters() if p.requires_grad]

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def rank_info(self) -> dict[str, int]:
        return {"rank": self.rank, "world_size": self.world_size, "pid": os.getpid()}
