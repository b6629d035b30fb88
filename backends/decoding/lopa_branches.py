"""LoPA's pieces: branch and block states, the shared prefix KV cache, token scores (see :mod:`.lopa`).

After zhijie-group/LoPA (commit 433177a608dee8901bae0e7c02f9b6f341a6f6d0), scale_dream_d2f/scale_dream_d2f.py:
``Branch``, ``find_shared_prefix_end``, ``sample_tokens``, ``evaluate_branch_confidence`` and the cache
handling of ``DreamLoRA._generate_enhanced_speculative`` with scale_dream_d2f/model_cache/dream/model_dream.py
(``update_kvcache``). Nothing of it is copied here. Shapes: T a branch's length (prompt and its added blocks),
P the cached prefix, N the columns of a forward, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .common import filter_logits

NEG_ENTROPY_EPS = 1e-10  # the authors' smoothing inside the logarithm of their negative entropy

ACTIVE, TO_CACHE, IN_CACHE = "active", "to_cache", "in_cache"


@dataclass
class Block:
    """Columns [start, end) of a branch; ``masks`` as last counted, ``total`` its size (the prompt's is its
    length), ``complete`` (fully activated: the fallback commit may fire) and ``state``: active, to_cache
    (finished, its keys go to the cache at the next forward) or in_cache."""

    start: int
    end: int
    masks: int
    total: int
    state: str = ACTIVE
    complete: bool = False

    @property
    def finished(self) -> bool:
        return self.state != ACTIVE and self.masks == 0


@dataclass
class Branch:
    """One candidate continuation: tokens (T,), the round each column was written at (T,; -1: never), its
    blocks (block 0 the prompt), the confidence of the token it was spawned with, base (a copy of the last
    winner, not a look-ahead), eos (an EOS was written: no more blocks are added) and its creation id."""

    tokens: torch.Tensor
    written: torch.Tensor
    blocks: list[Block]
    ident: int = 0
    creation: float = 1.0
    base: bool = True
    eos: bool = False

    def copy(self, ident: int, base: bool) -> Branch:
        return Branch(self.tokens.clone(), self.written.clone(), [replace(b) for b in self.blocks], ident,
                      1.0 if base else self.creation, base, self.eos)

    def active_blocks(self) -> list[int]:
        return [i for i, b in enumerate(self.blocks) if b.state == ACTIVE]

    def recount(self, mask_id: int, ids: list[int]) -> None:
        for i in ids:
            block = self.blocks[i]
            block.masks = int((self.tokens[block.start:block.end] == mask_id).sum())

    def finished_prefix(self) -> int:
        """Leading blocks finished (cached or to be), the prompt included."""
        count = 0
        for block in self.blocks:
            if not block.finished:
                break
            count += 1
        return count


def shared_prefix_end(branches: list[Branch]) -> int:
    """End column of the finished blocks every branch shares (at least the prompt's end)."""
    count = min(b.finished_prefix() for b in branches)
    first = branches[0]
    return first.blocks[count - 1].end if count else first.blocks[0].end


class PrefixKV:
    """Post-RoPE keys/values of the cached prefix (1, Hkv, P, D) per layer, in the attention cache protocol.

    A call attends over [prefix | its own N columns]; with ``store`` > 0 the keys/values of its first ``store``
    columns are kept aside (:attr:`pending`), and :meth:`adopt` appends those of the winning branch's call. So
    cached keys are computed once, by the forward that cached them, and never recomputed.
    """

    def __init__(self, n_layers: int):
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.store = 0
        self.pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    @property
    def length(self) -> int:
        return 0 if self.k[0] is None else self.k[0].shape[2]

    def plan(self, store: int) -> PrefixKV:
        self.store, self.pending = store, []
        return self

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.store:
            self.pending.append((k[:, :, :self.store], v[:, :, :self.store]))
        if self.k[layer] is None:
            return k, v
        return torch.cat([self.k[layer], k], 2), torch.cat([self.v[layer], v], 2)

    def finish_call(self) -> None:
        self.store = 0

    def adopt(self, pending: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        for layer, (k, v) in enumerate(pending):
            self.k[layer] = k if self.k[layer] is None else torch.cat([self.k[layer], k], 2)
            self.v[layer] = v if self.v[layer] is None else torch.cat([self.v[layer], v], 2)


def scores(logits: torch.Tensor, cfg, kind: str, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """logits (M, V) -> confidence (M,), token (M,), its probability (M,), as ``sample_tokens`` computes them:
    in the logits' dtype, over the tempered, filtered softmax; ``kind`` neg_entropy (sum p log(p + 1e-10)),
    margin (top-1 minus top-2) or probability (the token's). T > 0 draws from the row's generator."""
    if cfg.temperature > 0:
        logits = logits / cfg.temperature
    probs = filter_logits(logits, cfg.top_k, cfg.top_p).softmax(-1)
    if cfg.temperature > 0:
        token = torch.multinomial(probs.double(), 1, generator=gen)[:, 0]
        prob = probs.gather(-1, token[:, None])[:, 0]
    else:
        prob, token = probs.max(-1)
    if kind == "neg_entropy":
        return (probs * (probs + NEG_ENTROPY_EPS).log()).sum(-1), token, prob
    if kind == "margin":
        top = probs.topk(2, dim=-1).values
        return top[:, 0] - top[:, 1], token, prob
    return prob.clone(), token, prob


def branch_confidence(logits: torch.Tensor, tail: torch.Tensor, creation: float, mask_id: int, cfg, opts,
                      gen: torch.Generator) -> float:
    """logits (T - S, V) and tokens (T - S,) past the shared prefix S -> alpha * creation confidence +
    (1 - alpha) * the mean of the lowest floor(branch_topp * n) (at least 1) confidences of its n masks."""
    masked = (tail == mask_id).nonzero()[:, 0]
    future = 1.0
    if len(masked):
        conf = scores(logits[masked], cfg, opts.lopa_confidence, gen)[0]
        lowest = max(1, int(len(conf) * opts.lopa_branch_topp))
        future = conf.item() if len(conf) == 1 else conf.sort().values[:lowest].mean().item()
    alpha = opts.lopa_selection_conf_alpha
    return alpha * creation + (1.0 - alpha) * future
