"""d2Cache's query selection: certainty density, attention rollout, nucleus selection, inflation.

Re-implemented from Kamichanw/d2Cache@72feb60 (src/utils/common.py ``certainty_density``, ``nucleus_select``;
src/cache/d2cache.py ``d2Cache.accumulate_attn_rollout`` and ``on_step_end``); see :mod:`.d2cache` for how the
decoder uses them. Shapes: B rows, G generation length, T canvas length, N query columns, H query heads.
"""

from __future__ import annotations

import torch


def certainty_density(decoded: torch.Tensor, sigma: float) -> torch.Tensor:
    """decoded (B, G) bool -> density (B, G) float64: D_i = sum_j K(i - j) m_j / sum_d K(d), K(d) = exp(-d^2/2sigma^2).

    m runs over the generation region padded with G columns on each side: the left ones count as decoded
    (the prompt), the right ones only when the last generation column is decoded. The authors convolve by FFT
    with a kernel over distances -3G..3G-1, whose total is the constant denominator; this is the same sum taken
    directly, in float64.
    """
    _, g = decoded.shape
    m = decoded.double()
    right = m[:, -1:].expand(-1, g)
    padded = torch.cat([torch.ones_like(m), m, right], dim=1)  # (B, 3G)
    distance = torch.arange(g, device=m.device)[:, None] + g - torch.arange(3 * g, device=m.device)[None]
    kernel = torch.exp(-distance.double() ** 2 / (2 * sigma ** 2))  # (G, 3G)
    every = torch.arange(-3 * g, 3 * g, device=m.device, dtype=torch.float64)
    return padded @ kernel.T / torch.exp(-every ** 2 / (2 * sigma ** 2)).sum()


def nucleus_select(scores: torch.Tensor, top_p: float, allowed: torch.Tensor) -> torch.Tensor:
    """The authors' nucleus over ``allowed`` (B, T) bool: scores (B, T) renormalised over the allowed columns,
    sorted descending, kept while the running sum is <= top_p; the first always kept. Returns (B, T) bool."""
    scores = torch.where(allowed, scores, 0.0)
    probs = scores / (scores.sum(-1, keepdim=True) + 1e-9)
    ordered, order = probs.sort(-1, descending=True)
    keep = ordered.cumsum(-1) <= top_p
    keep[:, 0] = True
    keep &= allowed.gather(1, order)
    return torch.zeros_like(allowed).scatter_(1, order, keep)


def inflate(chosen: torch.Tensor, width: int) -> torch.Tensor:
    """chosen (B, T) bool with every gap of at most ``width`` columns between two chosen columns filled."""
    t = chosen.shape[1]
    columns = torch.arange(t, device=chosen.device).expand_as(chosen)
    following = torch.where(chosen, columns, t).flip(-1).cummin(-1).values.flip(-1)
    preceding = torch.where(chosen, columns, -1).cummax(-1).values
    gap = following - preceding
    return chosen | ((gap <= width) & (preceding >= 0) & (following < t))


class Rollout:
    """Attention rollout over one forward, R <- rownorm(A_l + I) R from R = I, where A_l is layer l's attention
    averaged over heads with the identity in the rows of columns that were not queries. Only query rows change,
    so each layer updates those rows of R (float32, as the authors' eager weights are). ``importance`` is the
    column sums g_j = sum_i R_ij (B, T)."""

    def __init__(self, batch: int, length: int, queries: torch.Tensor | None, device):
        self.r = torch.eye(length, device=device).expand(batch, -1, -1).clone()
        self.queries = queries  # (B, N) sorted query columns, or None: every column

    def __call__(self, layer: int, weights: torch.Tensor) -> None:
        """weights (B, H, N, T) of one layer's query rows."""
        a = weights.float().mean(1)
        index = self.queries if self.queries is not None else torch.arange(a.shape[1], device=a.device)[None]
        index = index.expand(a.shape[0], -1)
        a = a.scatter_add(2, index[..., None], torch.ones_like(a[..., :1]))  # + I on the query rows
        a = a / a.sum(-1, keepdim=True)
        if self.queries is None:
            self.r = a @ self.r
            return
        rows = a @ self.r
        self.r = self.r.scatter(1, index[..., None].expand(-1, -1, self.r.shape[2]), rows)

    @property
    def importance(self) -> torch.Tensor:
        return self.r.sum(1)
