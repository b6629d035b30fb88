"""dInfer's commit rules: threshold, credit-boosted threshold and hierarchy (segment maxima), batched.

Re-implemented from inclusionAI/dInfer@fce4e32, python/dinfer/decoding/parallel_strategy.py
(``get_transfer_index_threshold``, ``ThresholdParallelDecoder``, ``CreditThresholdParallelDecoder.
_apply_credit_fusion``, ``HierarchyDecoder.get_transfer_index``); the loop that runs them is :mod:`.dinfer`.
Each rule maps a block's logits (R, K, V) and its masked positions (R, K) to a commit mask (R, K); the
rows are independent (the authors' hierarchy asserts one row, its arithmetic is per row).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

#: the authors' margin under the top confidence: the top-1 always passes min(tau, max - EPS)
EPS = 1e-5


def threshold_commit(logits: torch.Tensor, masked: torch.Tensor, x0: torch.Tensor, tau: float, mask_id: int,
                     float64: bool) -> torch.Tensor:
    """Every candidate with confidence >= min(tau, top confidence - 1e-5) (the threshold never below -1000).

    Candidates are masked positions whose proposal x0 (R, K) is not the mask token; confidence is the
    float32 (``float64``: float64) softmax probability of x0, as the authors compute it.
    """
    probs = F.softmax(logits.to(torch.float64 if float64 else torch.float32), dim=-1)
    candidates = masked & (x0 != mask_id)
    conf = probs.gather(-1, x0[..., None])[..., 0].masked_fill(~candidates, float("-inf"))
    tau_eff = (conf.amax(-1, keepdim=True) - EPS).clamp(-1000, tau)
    return candidates & (conf >= tau_eff)


def hierarchy_commit(logits: torch.Tensor, masked: torch.Tensor, x0: torch.Tensor, tau: float, low: float | None,
                     logits_dtype: bool) -> torch.Tensor:
    """Per maximal run of adjacent masked positions, the positions equal to the run's top confidence when above
    ``low``; OR every position above ``tau``; OR the block's top-1. Confidence is exp(log_softmax)[x0] in the
    logits' dtype (``logits_dtype``, the authors' arithmetic: bfloat16 logits tie often) or else float64."""
    logp = F.log_softmax(logits if logits_dtype else logits.double(), dim=-1)
    conf = logp.gather(-1, x0[..., None])[..., 0].exp()
    floor = torch.finfo(conf.dtype).min
    conf = conf.masked_fill(~masked, floor)
    starts = masked & ~F.pad(masked[:, :-1], (1, 0))
    run = (starts.long().cumsum(-1) - 1).masked_fill(~masked, 0)  # run index of each masked position
    run_max = torch.full_like(conf, floor).scatter_reduce(1, run, conf, reduce="amax", include_self=True)
    commit = conf == run_max.gather(1, run)
    if low is not None:
        commit &= conf > low
    commit |= conf > tau
    commit |= F.one_hot(conf.argmax(-1), conf.shape[-1]).bool()
    return commit & masked


class CreditMemory:
    """The credit decoder's state for one decode: per row, an fp32 credit matrix (K, V) for the block it is in
    (``keys``: that block's index), and the calls made on it. The authors key the matrices by block span and
    clear them all once the sequence has no mask left; a block is visited once per sequence, so a row keeps only
    its current block's matrix and starts a fresh one when it moves on (the same fused logits)."""

    def __init__(self, batch: int):
        self.mats: torch.Tensor | None = None
        self.calls = torch.zeros(batch, dtype=torch.long)
        self.keys = torch.full((batch,), -1, dtype=torch.long)

    def fuse(self, logits: torch.Tensor, masked: torch.Tensor, rows: torch.Tensor, keys: torch.Tensor,
             alpha: float, gamma: float, beta: float) -> torch.Tensor:
        """logits (R, K, V) of ``rows`` in blocks ``keys`` (R,) -> fused logits + alpha * log(1 + C), after
        C <- beta * C (not on a block's first call) and C[i, argmax p_i] += (max p_i)^gamma at masked i."""
        if self.mats is None:
            self.mats = torch.zeros((len(self.calls), *logits.shape[1:]), dtype=torch.float32, device=logits.device)
        rows_cpu, keys_cpu = rows.cpu(), keys.cpu()
        moved = rows_cpu[self.keys[rows_cpu] != keys_cpu]
        self.mats[moved.to(logits.device)] = 0
        self.calls[moved], self.keys[rows_cpu] = 0, keys_cpu
        mat = self.mats[rows]
        decay = torch.where(self.calls[rows_cpu] > 0, beta, 1.0).to(mat)  # x 1.0 is exact: no decay
        mat.mul_(decay[:, None, None])
        top, index = F.softmax(logits.to(torch.float32), dim=-1).max(-1)
        mat.scatter_add_(2, index[..., None], (top.pow(gamma) * masked.to(top.dtype))[..., None])
        self.mats[rows] = mat
        self.calls[rows_cpu] += 1
        return logits + alpha * torch.log(mat + 1)
