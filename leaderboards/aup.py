"""Tokens per forward (TPF) and AUP (accuracy under parallelism): stopwatch-free speed, defined once.

**TPF** = generated tokens / network passes. DARE counts

* *generated tokens* as the canvas: ``gen_length`` per generation, whatever the tokens are (EOS padding
  included), as :mod:`.frontier` counts NFE per token and benchmarks/decode_frontier.py counts tokens/s.
  samples.jsonl keeps the text, not the token ids, so tokens before the first EOS (d2Cache's count) or a
  re-tokenised answer (d3LLM's) cannot be recounted from a record; and on a canvas, the default strategy
  (one token per step, ``steps == gen_length``) sits at exactly TPF 1, where d3LLM's data put every
  method's first point. The price: a decoder that fills the tail with EOS in one pass gets that tail
  credited, so TPF only compares runs on one canvas (a frontier group, whose runs share ``gen_length``);
* *network passes* as DARE's ``nfe`` (``Generation.nfe``: the forwards DARE's decoder ran), not
  ``nfe_official`` (what the family's own loop would run), because ``nfe`` is what the timed run spent.

So TPF = 1 / (NFE per canvas token) of the frontier page.

**AUP** follows d3LLM's ``get_aup`` and ``weight_function`` (hao-ai-lab/d3LLM@e5bfcca:
AUP_leaderboard/aup_utils.py), re-implemented here: points (rho = TPF, y = accuracy in percent) sorted by
rho (a stable sort on rho alone, so tied points keep their input order, as there), y1 the accuracy at the
smallest rho; the points with y >= y1 - offset are kept and

    AUP = rho_1 * y_1 + sum_k 1/2 (rho_k - rho_{k-1}) (y_k W(y_k) + y_{k-1} W(y_{k-1})),
    W(y) = min(exp(-alpha (1 - y / y_max)), 1),

the first rectangle unweighted, no normalisation (units: TPF x percentage points). Pinned: ``ALPHA`` 3,
``OFFSET`` 5 percentage points, y in percent (callers convert DARE's fractions). Where DARE differs:
the official code *asserts* that the last point (largest rho) is at most ``OFFSET`` below y1; DARE raises
:class:`AupUndefined` (a ValueError) instead, so a leaderboard build can show the curve's AUP as
undefined with the reason rather than stop. The official code prints a warning when some y < 1 (a
fraction passed as percent); DARE's callers pass percent by construction, so nothing is printed.
``y_max`` is the caller's pool; :mod:`.frontier` pins it (tests/leaderboards/test_aup.py holds the
official outputs this module is checked against).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ALPHA = 3.0  # penalty factor of W: the official default
OFFSET = 5.0  # percentage points an accuracy may fall below y1 and still count: the official default


class AupUndefined(ValueError):
    """The curve has no AUP: its last point (largest TPF) lies more than ``OFFSET`` below its first.

    The official ``get_aup`` stops on an AssertionError here; DARE reports it so the page can say why."""


def weight(y: float, y_max: float, alpha: float = ALPHA) -> float:
    """W(y) = min(exp(-alpha (1 - y / y_max)), 1): 1 at or above the best accuracy, shrinking below it."""
    return min(math.exp(-alpha * (1 - y / y_max)), 1.0)


def aup(rho: Sequence[float], y: Sequence[float], y_max: float, alpha: float = ALPHA,
        offset: float = OFFSET) -> float:
    """The AUP of one curve: ``rho`` its TPFs, ``y`` its accuracies in percent, ``y_max`` the pool's best.

    Raises ValueError on an empty curve, unequal lengths or a TPF <= 0 (the official asserts), and
    :class:`AupUndefined` when the accuracy at the largest TPF is more than ``offset`` below y1."""
    if len(rho) != len(y):
        raise ValueError(f"AUP needs one accuracy per TPF: {len(rho)} TPFs, {len(y)} accuracies")
    if not rho:
        raise ValueError("AUP of an empty curve")
    if any(not r > 0 for r in rho):
        raise ValueError(f"AUP needs every TPF > 0, got {list(rho)}")
    points = sorted(zip(rho, y), key=lambda point: point[0])  # stable: tied TPFs keep their order
    first, last = points[0][1], points[-1][1]
    if first - last > offset:
        raise AupUndefined(f"accuracy at the highest TPF ({last:.2f}%) is more than {offset:g} points below "
                           f"the accuracy at the lowest TPF ({first:.2f}%)")
    kept = [(r, acc) for r, acc in points if acc >= first - offset]
    if len(kept) > 1 and y_max <= 0:  # the official code divides by zero here
        raise AupUndefined("W is undefined: the best accuracy of the pool (y_max) is 0%")
    total = kept[0][0] * kept[0][1]  # the first rectangle, from TPF 0 to rho_1: unweighted
    for (r0, y0), (r1, y1) in zip(kept, kept[1:]):
        total += 0.5 * (r1 - r0) * (y1 * weight(y1, y_max, alpha) + y0 * weight(y0, y_max, alpha))
    return total


def tokens_per_forward(generations: int, gen_length: int, nfe: int) -> float | None:
    """TPF of ``generations`` outputs on a ``gen_length`` canvas that took ``nfe`` forwards in all;
    None when nothing was counted (no forward, or no generation)."""
    if nfe <= 0 or generations <= 0:
        return None
    return generations * gen_length / nfe
