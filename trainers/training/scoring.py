"""Grading any completions of a step's rows with that step's verifiers: the rewards of intermediate
predictions (MDPO) use exactly the graders and the reward rule of the final rollouts."""

from __future__ import annotations

import torch


class CompletionScorer:
    """``scorer(rows (N,), completions (N, T)) -> rewards (N,)``: row r answers item ``r // k``. Text is cut at
    the first stop token and decoded as the engine decodes; equal (row, tokens) pairs are graded once."""

    def __init__(self, pool, items: list, k: int, loaded):
        self.pool, self.items, self.k = pool, items, k
        self.tokenizer, self.stop_ids = loaded.tokenizer, set(loaded.stop_ids)
        self._seen: dict[tuple[int, tuple[int, ...]], float] = {}

    def _text(self, ids: list[int]) -> str:
        stop = next((i for i, t in enumerate(ids) if t in self.stop_ids), len(ids))
        return self.tokenizer.decode(ids[:stop], skip_special_tokens=True)

    def __call__(self, rows: torch.Tensor, completions: torch.Tensor) -> torch.Tensor:
        out = []
        for row, ids in zip(rows.tolist(), completions.tolist()):
            key = (row, tuple(ids))
            if key not in self._seen:
                item = self.items[row // self.k]
                verdict = self.pool.get(item.benchmark)(item.sample, self._text(ids))
                self._seen[key] = float(self.pool.reward(item.benchmark, verdict))
            out.append(self._seen[key])
        return torch.tensor(out, dtype=torch.float32)
