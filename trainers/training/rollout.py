"""Rollouts with a backend engine and the suite's DecodingConfig, turned into :class:`RolloutBatch` es.

The engine decodes exactly as in evaluation (same chat template, decoder, DecodingConfig); its network is
the policy's own (shared parameters, so no weight copy) unless the rollout runs in another dtype, in
which case the weights are synced before every rollout (DARE's / DiRL's online weight update).
"""

from __future__ import annotations

import logging

import torch

from dare.harness.engine import GenerationRequest, InProcessEngine, request_seed
from dare.harness.errors import ModelError
from dare.harness.records import DecodingConfig, Generation
from dare.harness.verifiers import verifiers

from ..batch import RolloutBatch
from .data import TrainItem, left_pad, stop_mask

log = logging.getLogger(__name__)


class Verifiers:
    """One verifier instance per benchmark, built with the benchmark's arguments; closed at the end.

    ``reward``: "task" turns verdicts into the task's published RL reward (:meth:`Verifier.reward`: Sudoku's
    partial credit, Countdown's 0.1 format term); "score" rewards the evaluation's score.
    """

    def __init__(self, reward: str = "task"):
        self._built: dict[str, object] = {}
        self.rule = reward

    def get(self, spec):
        if spec.name not in self._built:
            self._built[spec.name] = verifiers.get(spec.verifier)(**spec.verifier_args)
        return self._built[spec.name]

    def reward(self, spec, verdict) -> float:
        return verdict.score if self.rule == "score" else self.get(spec).reward(verdict)

    def close(self) -> None:
        """Close every verifier built so far; a later :meth:`get` builds a fresh one (a restarted fit loop)."""
        for v in self._built.values():
            v.close()
        self._built.clear()


def rollout_batch(engine: InProcessEngine, items: list[TrainItem], decoding: DecodingConfig, seed: int,
                  count_padding: bool, trajectory: bool) -> tuple[RolloutBatch, list[Generation]]:
    """Generate ``decoding.num_samples`` completions per item; rows are item-major (group = item)."""
    gens = engine.generate(rollout_requests(items, decoding, seed), decoding)
    return batch_from_generations(engine, items, decoding, gens, count_padding, trajectory), gens


def rollout_requests(items: list[TrainItem], decoding: DecodingConfig, seed: int) -> list[GenerationRequest]:
    """Item-major requests with per-request seeds: any split of them over engines decodes the same."""
    return [GenerationRequest(f"{it.sample.id}", i, it.messages, request_seed(seed, it.sample.id, i))
            for it in items for i in range(decoding.num_samples)]


def batch_from_generations(engine: InProcessEngine, items: list[TrainItem], decoding: DecodingConfig,
                           gens: list[Generation], count_padding: bool, trajectory: bool) -> RolloutBatch:
    """The :class:`RolloutBatch` of ``gens`` (in request order); ``engine`` only tokenises the prompts."""
    loaded = engine.model
    prompts = [engine.prompt_ids(it.messages) for it in items for _ in range(decoding.num_samples)]
    p_ids, p_mask = left_pad(prompts, loaded.pad_id)
    completion = torch.tensor([g.token_ids for g in gens], dtype=torch.long)
    ended = stop_mask(completion, loaded.stop_ids)
    bidirectional = loaded.arch.attention == "bidirectional"
    mask = torch.ones_like(ended) if count_padding and bidirectional else ended
    commit = None
    if trajectory:
        if any(g.trajectory is None for g in gens):
            raise ModelError("the engine returned no trajectory; it cannot record step maps")
        commit = torch.tensor([g.trajectory.commit_step for g in gens], dtype=torch.long)
    groups = torch.arange(len(items)).repeat_interleave(decoding.num_samples)
    return RolloutBatch(prompt_ids=p_ids, prompt_mask=p_mask, completion_ids=completion, completion_mask=mask,
                        completion_attn=torch.ones_like(mask), group_ids=groups, commit_step=commit)


def score(verifier_pool: Verifiers, items: list[TrainItem], gens: list[Generation], k: int):
    """Rewards (B,) under the pool's reward rule, and passed (B,) bool; infrastructure errors score 0 and are
    counted."""
    specs = [items[i // k].benchmark for i in range(len(gens))]
    verdicts = [verifier_pool.get(spec)(items[i // k].sample, g.text) for i, (spec, g) in enumerate(zip(specs, gens))]
    rewards = torch.tensor([verifier_pool.reward(s, v) for s, v in zip(specs, verdicts)], dtype=torch.float32)
    passed = torch.tensor([v.passed for v in verdicts], dtype=torch.bool)
    errors = sum(v.status == "error" for v in verdicts)
    return rewards, passed, errors


def zero_variance_groups(rewards: torch.Tensor, passed: torch.Tensor, k: int) -> dict[str, float]:
    """The share of prompts whose ``k`` rollouts all got the same reward (a group-centred advantage is 0 for
    every row: the group teaches nothing), and the share all solved or all failed (the same under a 0/1
    reward). ``rewards``, ``passed``: (B,), B = prompts x k in prompt order."""
    if k < 2 or rewards.numel() % k:
        return {}
    groups, solved = rewards.view(-1, k), passed.view(-1, k)
    flat = (groups == groups[:, :1]).all(1).float().mean()
    return {"zero_variance_groups": float(flat),
            "zero_variance_groups_solved": float((solved == solved[:, :1]).all(1).float().mean())}


def supervised_batch(engine: InProcessEngine, items: list[TrainItem], verifier_pool: Verifiers, count_padding: bool,
                     pad_to: int = 0) -> RolloutBatch:
    """(prompt, gold completion + EOS) pairs, right-padded with the pad id to the longest response or
    ``pad_to``. Masked-diffusion models see and (with ``count_padding``) learn the padding, LLaDA style:
    padded to the decoding canvas (``pad_to = gen_length``) they learn to fill the canvas after the answer
    with EOS, as they must at evaluation. Block-diffusion models never see the padding."""
    loaded = engine.model
    prompts, responses = [], []
    for it in items:
        gold = verifier_pool.get(it.benchmark).gold_completion(it.sample)
        if gold is None:
            continue
        prompts.append(engine.prompt_ids(it.messages))
        responses.append(gold)
    if not responses:
        raise ModelError("no gold completions for this batch; the verifier cannot render reference answers")
    return text_pairs_batch(loaded, prompts, responses, count_padding, torch.arange(len(responses)), pad_to)


def text_pairs_batch(loaded, prompts: list[list[int]], responses: list[str], count_padding: bool,
                     group_ids: torch.Tensor, pad_to: int = 0) -> RolloutBatch:
    """A batch of fixed (prompt ids, response text + EOS) rows: prompts left-padded, responses right-padded
    with the pad id to the longest or ``pad_to``. Masked-diffusion rows attend to (and with
    ``count_padding`` learn) the padding; block-diffusion rows never see it. group_ids (B,)."""
    ids = [loaded.tokenizer(text, add_special_tokens=False)["input_ids"] + [loaded.eos_id] for text in responses]
    p_ids, p_mask = left_pad(prompts, loaded.pad_id)
    width = max(max(len(r) for r in ids), pad_to)
    c_ids = torch.full((len(ids), width), loaded.pad_id, dtype=torch.long)
    real = torch.zeros((len(ids), width), dtype=torch.bool)
    for i, r in enumerate(ids):
        c_ids[i, :len(r)] = torch.tensor(r)
        real[i, :len(r)] = True
    bidirectional = loaded.arch.attention == "bidirectional"
    attn = torch.ones_like(real) if bidirectional else real
    mask = attn if count_padding and bidirectional else real
    return RolloutBatch(prompt_ids=p_ids, prompt_mask=p_mask, completion_ids=c_ids, completion_mask=mask,
                        completion_attn=attn, group_ids=group_ids)
