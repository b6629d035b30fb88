"""The local trainer: one process, CPU or one GPU, any registered algorithm.

Per step: rollout (engine + the suite's DecodingConfig, evaluation's prompts) -> rewards (the suite's
verifiers) -> estimator noise -> old / reference / rollout-copy log-probs -> advantages -> ``inner_steps``
optimizer updates (micro-batches accumulate exactly: see ``LossOutput.weight``) -> metrics line ->
checkpoint. Data order, rollout seeds and noise depend only on (seed, step): a killed run rerun with the
same command resumes from its last checkpoint and continues with the same batches.
"""

from __future__ import annotations

import json
import logging
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from dare.backends.models.loader import load_model
from dare.harness import stopping
from dare.harness.engine import EngineContext, InProcessEngine
from dare.harness.errors import ConfigError, DareError
from dare.harness.models import resolve
from dare.harness.options import capabilities
from dare.harness.registry import engines
from dare.harness.resolve import resolve_decoding

from ..api import Needs, build_algorithm
from ..batch import RolloutBatch
from ..lora.backend import BaseModelPolicy, build_lora_backend, plain_weights
from ..preference.pairs import preference_batch, preference_items
from ..state import checkpoint as ckpt
from ..state import reproducible
from ..state.progress import StepProgress
from .config import ROLLOUT_DEFAULTS, TrainConfig, resolve_algorithm
from .data import batch_indices, train_items
from .policy import ModelPolicy, training_kernel
from .rollout import Verifiers, score, supervised_batch, zero_variance_groups
from .scoring import CompletionScorer

log = logging.getLogger(__name__)
MAX_SKIPPED_UPDATES = 8  # consecutive non-finite updates before the run stops
ROLLOUT_FILE = "rollout.json"  # RUN/rollout.json: what the rollouts decode with (Trainer.rollout_record)
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def check_engine(engine_cls, name: str, needs: Needs) -> None:
    """Refuse engines that cannot serve the algorithm, before anything is loaded."""
    declared = capabilities(engine_cls)
    if needs.rollout and needs.trajectory and not declared.records_trajectory:
        raise ConfigError(f"this algorithm needs decoding trajectories and engine {name!r} cannot record them; "
                          "use --engine torch")
    if not declared.in_process_model:
        what = "roll out a live policy" if needs.rollout else "hold a trainable model"
        raise ConfigError(f"engine {name!r} cannot {what} (it has no in-process model); use --engine torch")


class TrainingError(DareError):
    """Training cannot go on (non-finite updates, a non-finite parameter): a one-line error naming the step."""


class Timer:
    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str):
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = round(self.seconds.get(phase, 0.0) + time.perf_counter() - began, 4)


def accumulate_gradients(algorithm, policy, batch: RolloutBatch, micro_batch_size: int,
                         inner: int) -> tuple[float, dict[str, float]]:
    """Backpropagate the plugin's loss over ``batch`` in micro-batches (gradients summed, weighted by each
    micro-batch's ``LossOutput.weight``). Returns the total weight and the weight-summed metrics; the
    caller normalises both. Shared by the local trainer and the verl workers, so plugins run unchanged."""
    total, stats = 0.0, {}
    for start in range(0, batch.size, micro_batch_size):
        loss, weight = 0.0, 0.0
        for term in algorithm.loss_terms(policy, batch.select(slice(start, start + micro_batch_size)), inner):
            (term.loss * term.weight).backward()
            loss, weight = loss + float(term.loss.detach()), term.weight
            for k, v in term.metrics.items():
                stats[k] = stats.get(k, 0.0) + v * weight
        total += weight
        stats["loss"] = stats.get("loss", 0.0) + loss * weight
    return total, stats


class LocalTrainer:
    def __init__(self, config: TrainConfig, run_dir: Path):
        self.config, self.run_dir = config, run_dir
        algo_name, settings = resolve_algorithm(config.algorithm, config.algorithm_settings)
        self.algorithm = build_algorithm(algo_name, settings)
        self.needs = self.algorithm.requirements()
        pairs = getattr(self.algorithm.config, "pairs", None)
        self.items = preference_items(config.suite, pairs) if self.needs.pairs else train_items(config.suite)
        engine_cls = engines.get(config.engine)
        check_engine(engine_cls, config.engine, self.needs)
        model = resolve(config.model, config.model_path)
        self.model_name, self.spec, self.base_path = config.model_label or model.name, model.spec, Path(model.path)
        self.metrics = ckpt.MetricsLog(run_dir / "metrics.jsonl")
        resume = ckpt.latest(run_dir)
        if resume is not None:  # refuse before loading anything when the settings changed
            ckpt.check_same_run(run_dir, config.fingerprint(), config.model_dump(mode="json"))
        device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
        # before any weight is made: the thread count and kernels the result depends on (recorded below)
        self.environment = reproducible.settle(config.threads, config.deterministic, device)
        lora = config.lora_rank > 0
        self.lora = build_lora_backend(config.lora_backend) if lora else None  # refuses before loading
        # LoRA runs restart from the base weights plus the saved adapters (exact resume of the optimizer)
        start_path = self.base_path if lora or resume is None else resume
        self.engine = self._engine(engine_cls, start_path, device, config.dtype)
        self.decoding, self.rollout_decoding = self._decodings()
        loaded = self.engine.model
        if lora:
            wrapped = self.lora.apply(loaded.net, config.lora_rank, config.lora_alpha, config.lora_dropout,
                                      tuple(config.lora_targets), seed=config.seed)
            if not wrapped:
                raise ConfigError(f"lora_targets {list(config.lora_targets)} match no linear layer of this model")
        else:
            loaded.net.requires_grad_(True)
        block = self.decoding.block_length if loaded.arch.attention == "block_causal" else None
        kernel = training_kernel(config.attention, loaded.arch.attention, device)
        self.policy = ModelPolicy(loaded, block, config.chunk_size, config.packed, kernel)
        self.estimator = self.algorithm.bind(self.policy.attention)
        ckpt.check_same_run(run_dir, config.fingerprint(), config.model_dump(mode="json"))
        self.reference = None
        if self.needs.reference:
            self.reference = (BaseModelPolicy(self.policy, self.lora) if lora
                              else self._frozen(self._load_reference(loaded, device)))
        self.rollout_engine, self.rollout_policy = self.engine, None
        if config.rollout_dtype and config.rollout_dtype != config.dtype:
            self.rollout_engine = self._engine(engine_cls, start_path, device, config.rollout_dtype)
            self.rollout_policy = self._frozen(self.rollout_engine.model)
        params = [p for p in self.policy.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.start_step = 0
        if resume is None:
            self.metrics.truncate(0)  # lines of an attempt killed before its first checkpoint
        else:
            state = ckpt.load_state(resume)
            if lora:
                self.lora.load_adapter_state(loaded.net, state["lora"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            self.start_step = state["step"]
            self.metrics.truncate(self.start_step)
            log.info("resuming %s from step %d", run_dir, self.start_step)
        reproducible.record(run_dir, self.start_step, self.environment)
        if self.needs.rollout:
            (run_dir / ROLLOUT_FILE).write_text(json.dumps(self.rollout_record(), indent=2, sort_keys=True) + "\n")
        self.verifiers = Verifiers(self.config.reward)
        self._step, self._skipped = self.start_step, 0  # non-finite guard: current step, consecutive skips

    def _lr_factor(self, update: int) -> float:
        """Linear warm-up over ``warmup_steps`` updates, then constant or cosine to 0 at the last update."""
        cfg = self.config
        if update < cfg.warmup_steps:
            return (update + 1) / (cfg.warmup_steps + 1)
        if cfg.lr_schedule == "constant":
            return 1.0
        total = max(cfg.steps * self.algorithm.config.inner_steps - cfg.warmup_steps, 1)
        return 0.5 * (1 + math.cos(math.pi * min(update - cfg.warmup_steps, total) / total))

    def _engine(self, engine_cls, path: Path, device: str, dtype: str) -> InProcessEngine:
        options = {"dtype": dtype, "record_trajectory": self.needs.trajectory}
        ctx = EngineContext(model_name=self.model_name, model_spec=self.spec, model_path=path, device=device,
                            options=options)
        return engine_cls(ctx)

    def _load_reference(self, loaded, device: str):
        """The frozen base model of the KL term (a hook: the verl trainer keeps it on its workers only)."""
        return load_model(self.base_path, loaded.arch.name, mask_id=loaded.mask_id, eos_id=loaded.eos_id,
                          device=device, dtype=_DTYPES[self.config.dtype])

    def _frozen(self, loaded) -> ModelPolicy:
        loaded.net.requires_grad_(False)
        return ModelPolicy(loaded, self.policy.block_size, self.config.chunk_size, self.config.packed,
                           self.policy.kernel)

    def _decodings(self):
        """The evaluation's DecodingConfig and the rollouts': the evaluation's, the algorithm's typed additions
        (e.g. CJ-GRPO's schedule), then the user's ``rollout_decoding``, checked against the decoder by the one
        resolver exactly as an evaluation's settings are (an unread field or unknown ``extra`` option set by the
        algorithm or the user exits 2 before anything trains)."""
        cfg = self.config
        evaluation = resolve_decoding(self.engine, self.spec, cfg.suite, cfg.decoding, source="decoding").config
        rows = cfg.prompts_per_step * cfg.group_size
        self.rollout_additions = self.algorithm.rollout_additions(evaluation, self.engine.model.arch)
        algo = self.rollout_additions.settings(evaluation) if self.rollout_additions is not None else {}
        settings = {"num_samples": cfg.group_size, "batch_size": rows, **ROLLOUT_DEFAULTS, **algo,
                    **cfg.rollout_decoding}
        try:
            self.rollout_resolved = resolve_decoding(self.engine, None, cfg.suite, settings, base=evaluation,
                                                     explicit=set(algo) | set(cfg.rollout_decoding),
                                                     source="rollout_decoding")
        except ConfigError as exc:  # name the rollouts' settings, not the generic --set of an evaluation
            raise ConfigError(exc.problems, source="rollout_decoding") from exc
        rollout = self.rollout_resolved.config
        self.algorithm.check_rollout(rollout)
        return evaluation, rollout

    def rollout_record(self) -> dict[str, Any]:
        """What the rollouts decode with, for ``RUN/rollout.json`` and the evaluation's run.json: the resolved
        DecodingConfig (its hash), the decoder, its typed options, and the algorithm's declared additions."""
        resolved, additions = self.rollout_resolved, self.rollout_additions
        decoding = self.rollout_decoding
        record = {
            "decoding": decoding.model_dump(mode="json", include=set(resolved.fields) if resolved.fields else None),
            "config_hash": decoding.config_hash(),
            "decoder": resolved.decoder.name if resolved.decoder is not None else None,
            "decoder_options": resolved.options.model_dump(mode="json") if resolved.options is not None else None,
            "algorithm_additions": ({"model": type(additions).__name__, **additions.model_dump(mode="json")}
                                    if additions is not None else None),
        }
        plan = self.algorithm.rollout_plan(decoding)
        if plan is not None:  # a rollout of the algorithm's own (d-TreeRPO's trees)
            record["rollout_mode"] = plan
        return record

    # ---------------------------------------------------------------- one step
    def _batch(self, step: int, timer: Timer, row: dict[str, Any]) -> RolloutBatch:
        cfg = self.config
        items = [self.items[i] for i in batch_indices(len(self.items), cfg.prompts_per_step, step, cfg.seed)]
        count_padding = self.algorithm.config.count_padding
        if self.needs.pairs:
            with timer("data"):
                return preference_batch(self.engine, items, count_padding)
        if not self.needs.rollout:
            with timer("data"):
                canvas = self.decoding.gen_length if self.policy.attention == "bidirectional" else 0
                return supervised_batch(self.engine, items, self.verifiers, count_padding, canvas)
        with timer("rollout"):
            batch, gens = self._rollout(items, cfg.seed * 1_000_003 + step, count_padding)
        with timer("reward"):
            rewards, passed, errors = score(self.verifiers, items, gens, self.rollout_decoding.num_samples)
        batch.rewards = self.algorithm.row_rewards(batch, rewards)
        lengths = batch.completion_mask.sum(1).float()
        row.update(reward=float(rewards.mean()), reward_std=float(rewards.std()) if len(rewards) > 1 else 0.0,
                   accuracy=float(passed.float().mean()), completion_length=float(lengths.mean()),
                   verifier_errors=errors, nfe=float(sum(g.nfe or 0 for g in gens)) / len(gens),
                   **zero_variance_groups(rewards, passed, self.rollout_decoding.num_samples))
        return batch

    def _rollout(self, items, seed: int, count_padding: bool):
        """Decode ``items`` with the rollout engine (a hook: the verl trainer decodes on its workers)."""
        if self.rollout_policy is not None:  # online weight update of the low-precision rollout copy
            self.rollout_policy.net.load_state_dict(plain_weights(self.policy.net, self.lora))
        return self.algorithm.rollout(self.rollout_engine, items, self.rollout_decoding, seed, self._step,
                                      count_padding, self.needs.trajectory)

    @property
    def batch_device(self) -> torch.device:
        """Where a step's batch lives (a hook: the verl trainer keeps it on the driver's CPU)."""
        return self.policy.device

    def _scorer(self, step: int) -> CompletionScorer:
        cfg = self.config
        items = [self.items[i] for i in batch_indices(len(self.items), cfg.prompts_per_step, step, cfg.seed)]
        return CompletionScorer(self.verifiers, items, self.rollout_decoding.num_samples, self.engine.model)

    @torch.no_grad()
    def _logp(self, policy: ModelPolicy, batch: RolloutBatch) -> torch.Tensor:
        """Estimator log-probs for every noise set: (S, B, T)."""
        out = []
        for noise_index in range(len(batch.noise)):
            parts = []
            for start in range(0, batch.size, self.config.micro_batch_size):
                mb = batch.select(slice(start, start + self.config.micro_batch_size))
                parts.append(self.estimator.estimate(policy, mb, mb.noise[noise_index]).token_logp)
            out.append(torch.cat(parts))
        return torch.stack(out)

    def _update(self, batch: RolloutBatch) -> dict[str, float]:
        cfg, params = self.config, [p for p in self.policy.parameters() if p.requires_grad]
        summed: dict[str, float] = {}
        first: dict[str, float] = {}
        applied = 0
        for inner in range(self.algorithm.config.inner_steps):
            self.optimizer.zero_grad(set_to_none=True)
            total, stats = accumulate_gradients(self.algorithm, self.policy, batch, cfg.micro_batch_size, inner)
            for p in params:
                if p.grad is not None:
                    p.grad.div_(max(total, 1e-8))
            norm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip or float("inf"))
            stats = {k: v / max(total, 1e-8) for k, v in stats.items()} | {"grad_norm": float(norm)}
            # a non-finite loss or gradient never reaches the optimizer (the norm is NaN/inf if any grad is)
            if not (math.isfinite(float(norm)) and math.isfinite(stats.get("loss", 0.0))):
                self.optimizer.zero_grad(set_to_none=True)
                self._skipped += 1
                log.warning("update %d of step %d skipped: non-finite loss or gradient", inner + 1, self._step + 1)
                if self._skipped >= MAX_SKIPPED_UPDATES:
                    raise TrainingError(f"step {self._step + 1}: {self._skipped} consecutive updates had a non-finite "
                                        "loss or gradient; lower lr or check the algorithm's settings")
                continue
            self._skipped = 0
            self.optimizer.step()
            self.scheduler.step()
            if applied == 0:
                first = stats
            applied += 1
            for k, v in stats.items():
                summed[k] = summed.get(k, 0.0) + v
        summed = {k: v / max(applied, 1) for k, v in summed.items()}
        summed["skipped_nonfinite"] = self.algorithm.config.inner_steps - applied
        for key in ("ratio_max_dev", "kl_ref"):  # before any update of this batch: ratio 1, policy == old
            if key in first:
                summed[f"first_inner_{key}"] = first[key]
        return summed

    def step(self, step: int) -> dict[str, Any]:
        timer, row, cpu = Timer(), {"step": step + 1}, time.process_time()
        self._step = step
        batch = self._batch(step, timer, row).to(self.batch_device)
        if self.needs.rollout:  # e.g. MDPO grades the intermediate predictions of every decoding step
            with timer("prepare"):
                self.algorithm.prepare(self.policy, batch, self._scorer(step))
        seed = self.algorithm.config.noise_seed
        gen = torch.Generator().manual_seed(seed if seed is not None else self.config.seed * 7_919 + step)
        batch.noise = self.algorithm.draw_noise(self.estimator, batch, gen)
        if self.needs.rollout:
            with timer("old_logp"):
                batch.old_logp = self._logp(self.policy, batch)
        if self.reference is not None:  # rollouts (KL terms) and supervised pairs (DPO) alike
            with timer("ref_logp"):
                batch.ref_logp = self._logp(self.reference, batch)
        if self.needs.rollout:
            if self.rollout_policy is not None:
                rollout = self._logp(self.rollout_policy, batch)[0]
                diff = (rollout - batch.old_logp[0]).abs() * batch.completion_mask
                row["logp_mismatch_mean"] = float(diff.sum() / batch.completion_mask.sum().clamp(min=1))
                row["logp_mismatch_max"] = float(diff.max())
            batch.advantages = self.algorithm.advantages(batch)
        with timer("update"):
            row.update(self._update(batch))
        row["lr"] = self.scheduler.get_last_lr()[0]
        row["time"] = timer.seconds
        row["cpu_s"] = round(time.process_time() - cpu, 3)  # this process, all threads (not Ray workers)
        return row

    def train(self) -> Path | None:
        """Run from the resume point to ``config.steps``; returns the final checkpoint. A stop asked for by a
        signal (:mod:`dare.harness.stopping`) lets the step in flight finish, checkpoints it and raises
        ``Stopped``: the rerun resumes there and ends with the uninterrupted run's weights."""
        cfg, final = self.config, ckpt.latest(self.run_dir)
        progress = StepProgress(self.start_step, cfg.steps)
        try:
            for step in range(self.start_step, cfg.steps):
                stopping.safe_point()  # asked for during the previous step (checkpointed below) or start-up
                row = self.step(step)
                # the line goes first: a kill before the checkpoint drops it again on resume (no duplicates)
                self.metrics.append(row)
                progress.step(step + 1, row)
                log.info("step %d: %s", step + 1, {k: v for k, v in row.items() if k != "time"})
                if (step + 1) % cfg.save_every == 0 or step + 1 == cfg.steps or stopping.requested():
                    final = self._save(step + 1)
        finally:
            self.verifiers.close()
        return final

    def _save(self, step: int) -> Path:
        bad = [n for n, p in self.policy.net.named_parameters() if not torch.isfinite(p).all()]
        if bad:  # never a checkpoint that would poison every later evaluation or resume
            raise TrainingError(f"step {step}: parameter {bad[0]} is not finite ({len(bad)} "
                                "tensors); no checkpoint written; lower lr and rerun")
        began = time.perf_counter()
        cfg = self.config
        final = ckpt.save(self.run_dir, step, self.policy, self.base_path, self.optimizer,
                          {"scheduler": self.scheduler.state_dict(), "fingerprint": cfg.fingerprint()},
                          cfg.keep_checkpoints, self.lora)
        log.info("checkpoint %s written in %.2fs", final.name, time.perf_counter() - began)
        return final
