"""``DareWorker``: one verl single-controller worker per device, holding an FSDP2-sharded policy.

The worker builds the same rollout engine, model, algorithm and estimator as the local trainer (from our
registries) and runs, on its contiguous chunk of the global batch (``Dispatch.DP_COMPUTE_PROTO``):

* ``generate``: rollout with the evaluation's engine (torch on CPU, fastdllm on GPU) and DecodingConfig.
  The engine's network *is* the sharded policy (as in the local trainer, engine and policy share one
  module), so there is no weight sync: before decoding every FSDP2 block is unsharded once (one lockstep
  all-gather per block) with ``reshard_after_forward`` off, then each rank runs as many forwards as its
  own requests need (early EOS, confidence thresholds) with no collectives, and the blocks are resharded.
  After an optimizer step the next unshard gathers the new weights. Per-request seeds make the result
  independent of how the requests are split over ranks. Costs one unsharded weight copy during rollout.
* ``compute_logp``: old log-probs on the policy, reference log-probs on a second sharded module (the
  base checkpoint, frozen), for every noise set (same seeded draws as the update).
* ``update``: the plugin's ``loss``. What makes N ranks equal one process (``LossOutput.weight``
  accumulation, as in the local trainer):

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
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from verl import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register

from dare.harness.oom import MemoryReport

log = logging.getLogger(__name__)
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}


def _is_dtensor(t: torch.Tensor) -> bool:
    return hasattr(t, "full_tensor") and hasattr(t, "to_local")


def _shard_blocks(net: torch.nn.Module, mesh) -> None:
    """FSDP2 over the transformer blocks; embedding, final norm and LM head stay replicated (see above)."""
    from torch.distributed.fsdp import fully_shard

    for layer in net.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=True)


class DareWorker(Worker):
    """Fused actor + rollout + reference role: sharded policy, engine over it, optimizer."""

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
        """Build engine, policy, reference, algorithm and optimizer from ``spec`` (``VerlTrainer._worker_spec``)."""
        from torch.distributed.device_mesh import init_device_mesh

        from dare.backends.models.loader import load_model
        from dare.harness.engine import EngineContext
        from dare.harness.registry import engines
        from dare.trainers import plugin  # noqa: F401  (registers the built-in algorithms and estimators)
        from dare.trainers.api import build_algorithm
        from dare.trainers.training.policy import ModelPolicy

        options = {"dtype": spec["dtype"], "record_trajectory": spec["trajectory"]}
        ctx = EngineContext(model_name=spec["model_name"], model_spec=spec["model_spec"],
                            model_path=Path(spec["path"]), device=str(self.device), options=options)
        self.engine = engines.get(spec["engine"])(ctx)
        loaded = self.engine.model  # the engine decodes with this very network: no weight copy to sync
        loaded.net.requires_grad_(True)
        mesh = init_device_mesh(self.device_type, (self.world_size,))
        _shard_blocks(loaded.net, mesh)
        kernel = {"kernel": spec["kernel"]} if spec.get("kernel") else {}
        self.policy = ModelPolicy(loaded, spec["block"], spec["chunk_size"], spec["packed"], **kernel)
        self.reference = None
        if spec["reference"]:  # the frozen base model of the KL term, sharded like the policy
            base = load_model(spec["reference"], loaded.arch.name, mask_id=loaded.mask_id, eos_id=loaded.eos_id,
                              device=self.device, dtype=_DTYPES[spec["dtype"]])
            _shard_blocks(base.net, mesh)
            self.reference = ModelPolicy(base, spec["block"], spec["chunk_size"], spec["packed"], **kernel)
        self.algorithm = build_algorithm(spec["algorithm"], spec["settings"])
        self.estimator = self.algorithm.bind(self.policy.attention)
        self.params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=spec["lr"], betas=tuple(spec["betas"]),
                                           weight_decay=spec["weight_decay"])
        self.micro_batch_size, self.grad_clip = spec["micro_batch_size"], spec["grad_clip"]
        sharded = sum(p.numel() for p in self.params if _is_dtensor(p))
        return {"rank": self.rank, "pid": os.getpid(), "sharded_params": sharded, "engine": self.engine.name,
                "replicated_params": sum(p.numel() for p in self.params) - sharded, "memory": MemoryReport.now()}

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def memory(self) -> MemoryReport:
        """This rank's pid, peak memory and OOM-kill count, so the driver can name its death (dare.harness.oom)."""
        return MemoryReport.now()

    @contextmanager
    def _unsharded(self):
        """Full policy weights on every rank, so ranks may run different numbers of decoding forwards."""
        from torch.distributed.fsdp import FSDPModule

        blocks = [m for m in self.policy.net.modules() if isinstance(m, FSDPModule)]
        with torch.no_grad():
            for block in blocks:  # the same order on every rank: one all-gather per block
                block.set_reshard_after_forward(False, recurse=False)
                block.unshard()
        try:
            yield
        finally:
            for block in blocks:
                block.reshard()
                block.set_reshard_after_forward(True, recurse=False)

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO)
    def generate(self, data: DataProto) -> DataProto:
        """Decode this rank's ``non_tensor_batch["request"]`` with ``meta_info["decoding"]``; one
        :class:`~dare.harness.records.Generation` per request in ``non_tensor_batch["generation"]``."""
        from .dataproto import object_array

        requests = list(data.non_tensor_batch["request"])
        forwards = [0]  # network forwards of this rank (ranks may differ: rows finish at their own step)

        def count(*_):
            forwards[0] += 1

        counter = self.policy.net.layers[0].register_forward_pre_hook(count)
        try:
            with self._unsharded():
                gens = self.engine.generate(requests, data.meta_info["decoding"])
        finally:
            counter.remove()
        return DataProto.from_dict(tensors={"row": data.batch["row"]}, non_tensors={"generation": object_array(gens)},
                                   meta_info={"metrics": {"rollout_forwards": forwards[0]}})

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO)
    def compute_logp(self, data: DataProto) -> DataProto:
        """Estimator log-probs of this rank's rows under the policy (``meta_info["which"] == "old"``) or the
        reference (``"ref"``), for every noise set: ``logp`` (B, S, T), batch-first for ``DataProto.concat``."""
        from .dataproto import from_dataproto

        batch = from_dataproto(data, self.device)
        policy = self.reference if data.meta_info["which"] == "ref" else self.policy
        out = []
        with torch.no_grad():
            for noise in range(len(batch.noise)):  # same micro-batching as LocalTrainer._logp
                parts = []
                for start in range(0, batch.size, self.micro_batch_size):
                    mb = batch.select(slice(start, start + self.micro_batch_size))
                    parts.append(self.estimator.estimate(policy, mb, mb.noise[noise]).token_logp)
                out.append(torch.cat(parts))
        logp = torch.stack(out).transpose(0, 1)
        return DataProto.from_dict(tensors={"logp": logp.detach().cpu().contiguous()})

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
        from ..training.trainer import accumulate_gradients
        from .dataproto import from_dataproto

        batch = from_dataproto(data, self.device)
        lrs = data.meta_info["lrs"]
        summed: dict[str, float] = {}
        first: dict[str, float] = {}
        applied = skipped = 0
        for inner, lr in enumerate(lrs):
            self.optimizer.zero_grad(set_to_none=True)
            total, stats = accumulate_gradients(self.algorithm, self.policy, batch, self.micro_batch_size, inner)
            keys = sorted(stats)  # every rank computes the same metric names
            reduced = self._all_reduce([total, *(stats[k] for k in keys)])
            total, stats = reduced[0], {k: v / max(reduced[0], 1e-8) for k, v in zip(keys, reduced[1:])}
            stats["grad_norm"] = self._finish_grads(total)
            # the norm and loss are global (all-reduced), so every rank skips the same non-finite update
            if not (math.isfinite(float(stats["grad_norm"])) and math.isfinite(stats.get("loss", 0.0))):
                self.optimizer.zero_grad(set_to_none=True)
                skipped += 1
                continue
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            if not first:
                first = stats
            applied += 1
            for k, v in stats.items():
                summed[k] = summed.get(k, 0.0) + v
        summed = {k: v / max(applied, 1) for k, v in summed.items()}
        summed["skipped_nonfinite"] = skipped
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
            out[name] = {k: ((v.full_tensor() if _is_dtensor(v) else v).detach().cpu().clone()
                             if torch.is_tensor(v) else v)
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
