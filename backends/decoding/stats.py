"""Greedy (T = 0) proposal statistics without materialising float64 probabilities over the vocabulary.

A full-vocabulary checkpoint (LLaDA 126k, Dream 152k rows) makes the policy, not the network, the cost of a
tiny model's step: ``logits.double().softmax(-1)`` allocates and writes B * K * V doubles, and Dream's
entropy did it twice more. Everything a greedy policy needs is a per-position reduction:

    m = max_v l_v,  S = sum_v exp(l_v - m),  p(x0) = 1 / S,  sum_v p_v log p_v = sum_v e_v (l_v - m) / S - log S

(e_v = exp(l_v - m)), computed in float64 as the full softmax was (float32 logits convert exactly, so the
argmax and the ordering of confidences are those of the float64 softmax up to its last bit), over chunks of
positions so the float64 working set stays small.
"""

from __future__ import annotations

import torch

CHUNK_ELEMENTS = 1 << 20  # float64 elements per chunk (8 MiB): stays in cache, no large allocations


def greedy_stats(logits: torch.Tensor, entropy: bool = False, margin: bool = False) -> dict[str, torch.Tensor]:
    """logits (B, K, V) -> ``x0`` (B, K) argmax, ``p`` (B, K) float64 softmax probability of x0, and when asked
    ``neg_entropy`` (B, K) sum p log p and ``margin`` (B, K) p(top1) - p(top2), both float64."""
    shape, vocab = logits.shape[:-1], logits.shape[-1]
    flat = logits.reshape(-1, vocab)
    x0 = flat.argmax(-1)  # argmax of the exact float64 conversion, same first-index tie rule
    p = torch.empty(flat.shape[0], dtype=torch.float64, device=logits.device)
    neg = torch.empty_like(p) if entropy else None
    gap = torch.empty_like(p) if margin else None
    rows = max(1, CHUNK_ELEMENTS // vocab)
    for lo in range(0, flat.shape[0], rows):
        part = flat[lo:lo + rows].double()
        z = part - part.amax(-1, keepdim=True)  # <= 0, exactly 0 at the argmax
        e = z.exp()
        total = e.sum(-1)
        p[lo:lo + rows] = total.reciprocal()
        if entropy:
            terms = torch.where(e > 0, e * z, 0.0)  # a -inf logit (a banned token) adds 0, not 0 * -inf
            neg[lo:lo + rows] = terms.sum(-1) / total - total.log()
        if margin:
            gap[lo:lo + rows] = (1 - z.topk(2, dim=-1).values[:, 1].exp()) / total
    out = {"x0": x0.view(shape), "p": p.view(shape)}
    if entropy:
        out["neg_entropy"] = neg.view(shape)
    if margin:
        out["margin"] = gap.view(shape)
    return out


def prob_of(logits: torch.Tensor, x0: torch.Tensor) -> torch.Tensor:
    """float64 softmax probability of the chosen tokens: logits (B, K, V), x0 (B, K) -> (B, K), in chunks."""
    vocab = logits.shape[-1]
    flat, idx = logits.reshape(-1, vocab), x0.reshape(-1, 1)
    out = torch.empty(flat.shape[0], dtype=torch.float64, device=logits.device)
    rows = max(1, CHUNK_ELEMENTS // vocab)
    for lo in range(0, flat.shape[0], rows):
        part = flat[lo:lo + rows].double()
        top = part.amax(-1, keepdim=True)
        chosen = part.gather(-1, idx[lo:lo + rows]) - top
        out[lo:lo + rows] = (chosen.exp() / (part - top).exp().sum(-1, keepdim=True))[:, 0]
    return out.view(x0.shape)


def plain_greedy(temperature: float, top_k: int | None, top_p: float | None, vocab: int) -> bool:
    """True when proposals are the plain argmax and confidences come from the unfiltered softmax."""
    return temperature == 0 and (top_k is None or top_k >= vocab) and (top_p is None or top_p >= 1.0)
