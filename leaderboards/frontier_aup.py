"""AUP of each strategy of a frontier group: the comparison group, curve and pool pinned for DARE.

d3LLM scores a *method* by the curve through its own points, usually two: (1.0, its accuracy at one token
per step) and (TPF, accuracy) of its fast setting (AUP_leaderboard/data_*.yaml at hao-ai-lab/d3LLM@e5bfcca).
A DARE frontier point is one run, so the rule here is:

* **comparison group** = a frontier group (:mod:`.frontier`): runs sharing everything but the strategy;
* **curve** of a strategy, per benchmark = the group's reference point (:func:`.frontier.reference_point`:
  the default strategy, one token per step, so TPF 1 on the canvas) then the strategy's own point; the
  reference's own curve is its single point (AUP = its TPF x accuracy). The reference stands in for each
  strategy's own one-token-per-step run, which a group need not hold (its accuracy can differ: another
  remasking rule at one token per step is another decoding). Tied TPFs keep this order (anchor first);
* **y** = the benchmark's primary metric in percent; **rho** = the benchmark's TPF (:mod:`.aup`);
* **y_max** = the best accuracy on that benchmark over every point of the group, as d3LLM's main.py takes
  the best over every method of a task (points without a TPF count too: their accuracy is measured);
* **mean** = the sum of the benchmarks' AUPs over the group's benchmark list (the suite's benchmarks, the
  same for every point of a group), not d3LLM's fixed ``/ 5.0``; undefined when one benchmark's is.

A benchmark's AUP is undefined, with a note, when a point of its curve has no TPF (a sample without NFE)
or when :func:`.aup.aup` raises :class:`.aup.AupUndefined` (the accuracy fell more than 5 points).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .aup import AupUndefined, aup

if TYPE_CHECKING:
    from .frontier import Point


def score_group(points: list[Point], reference: Point) -> dict[str, float]:
    """Fill every point's per-benchmark ``aup``/``note`` and its ``aup``/``aup_note``; return the pool's
    y_max per benchmark, in percent."""
    benchmarks = sorted(reference.benchmarks)
    y_max = {bench: 100 * max(p.benchmarks[bench].accuracy for p in points) for bench in benchmarks}
    for point in points:
        notes = []
        for bench in benchmarks:
            mine, anchor = point.benchmarks[bench], reference.benchmarks[bench]
            curve = [anchor] if point is reference else [anchor, mine]
            if any(p.tpf is None for p in curve):
                who = "this run" if mine.tpf is None else "the reference run"
                mine.note = f"no TPF: {who} has a sample without NFE"
            else:
                try:
                    mine.aup = aup([p.tpf for p in curve], [100 * p.accuracy for p in curve], y_max[bench])
                except AupUndefined as undefined:
                    mine.note = str(undefined)
            if mine.note:
                notes.append(f"{bench}: {mine.note}" if len(benchmarks) > 1 else mine.note)
        if notes:
            point.aup, point.aup_note = None, "; ".join(notes)
        else:
            point.aup = sum(point.benchmarks[b].aup for b in benchmarks) / len(benchmarks)
    return y_max
