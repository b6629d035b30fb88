"""Frontier pages as static HTML with inline SVG drawn here (no script, no chart library, no network).

``frontier/<model>-<suite>-<hash>.html``: per group (see :mod:`.frontier`) accuracy against tokens/s and
against NFE per token, each point a link to its run's drill-down (``../index.html#run=<key>``), the
Pareto front filled and joined, dominated points hollow, and a table of the same numbers with each
strategy's tokens per forward (TPF) and AUP (:mod:`.frontier_aup`; an undefined AUP shows its reason).
``frontier/index.html``: every page's charts, one section per (model, suite).
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from .frontier import Frontier, Point, page_name
from .labels import FONT_FAMILY, FONT_SIZE, LabelPlacer, leader_end

CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'none'; connect-src 'none'; "
       "base-uri 'none'; form-action 'none'")
FRONT, DOMINATED, BAR = "#1c7ed6", "#868e96", "#adb5bd"
WIDTH, HEIGHT, PAD = 520, 340, (58, 14, 46, 30)  # left, right, bottom, top
RULE = ("Points share model, suite, data, prompt, verifier, samples, every decoding setting but the strategy "
        "(engine, decoder and its options, remasking, steps, threshold, factor, cache) and the machine. "
        "Pareto front: no other point has at least the accuracy and at least the speed (or at most the NFE), "
        "better on one; on the point estimates, so read the intervals before calling a gap real.")


def run_link(point: Point) -> str:
    return f"../index.html#run={point.run.key}&bench={point.benchmark}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (steps of 1, 2 or 5 times a power of ten)."""
    span = high - low if high > low else abs(high) or 1.0
    raw = span / count
    step = min((m * 10 ** math.floor(math.log10(raw)) for m in (1, 2, 5, 10)), key=lambda s: abs(s - raw))
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _bounds(points: list[Point], attr: str) -> tuple[float, float, float, float]:
    """(x0, x1, y0, y1): x from 0 (so ratios read off the axis), y around the intervals."""
    xs = [getattr(p, attr) for p in points]
    x1 = max(xs) * 1.1 or 1.0
    lows, highs = [p.ci[0] for p in points], [p.ci[1] for p in points]
    y0, y1 = min(lows), max(highs)
    margin = max(0.02, (y1 - y0) * 0.08)
    # A margin beyond 100% keeps points at 100% off the frame; the ticks stop at 100%.
    return 0.0, x1, max(0.0, y0 - margin), min(1.0, y1) + margin


def scatter(points: list[Point], attr: str, label: str, front_attr: str, better: str) -> str:
    """One chart: accuracy (y, with its interval) against ``attr`` of each point; empty without data."""
    shown = [p for p in points if getattr(p, attr) is not None]
    if not shown:
        return f'<p class="empty">No run of this group records its {escape(label)}.</p>'
    x0, x1, y0, y1 = _bounds(shown, attr)
    left, right, bottom, top = PAD[0], WIDTH - PAD[1], HEIGHT - PAD[2], PAD[3]

    def sx(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * (right - left)

    def sy(v: float) -> float:
        return bottom - (v - y0) / ((y1 - y0) or 1.0) * (bottom - top)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="frontier-chart" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="accuracy against {escape(label)}">',
             f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
             'fill="#fff" stroke="#ced4da"/>']
    for tick in nice_ticks(x0, x1):
        if tick <= x1:
            parts.append(f'<line x1="{sx(tick):.1f}" y1="{bottom}" x2="{sx(tick):.1f}" y2="{bottom + 4}" '
                         'stroke="#888"/>'
                         f'<text x="{sx(tick):.1f}" y="{bottom + 16}" font-size="11" text-anchor="middle" '
                         f'fill="#555">{tick:g}</text>')
    for tick in nice_ticks(y0, y1):
        if y0 <= tick <= min(y1, 1.0):
            parts.append(f'<line x1="{left}" y1="{sy(tick):.1f}" x2="{right}" y2="{sy(tick):.1f}" stroke="#f1f3f5"/>'
                         f'<text x="{left - 6}" y="{sy(tick) + 4:.1f}" font-size="11" text-anchor="end" '
                         f'fill="#555">{100 * tick:g}%</text>')
    parts.append(f'<text x="{(left + right) / 2}" y="{HEIGHT - 8}" font-size="12" text-anchor="middle" fill="#222">'
                 f'{escape(label)} ({better} is better)</text>'
                 f'<text x="14" y="{(top + bottom) / 2}" font-size="12" text-anchor="middle" fill="#222" '
                 f'transform="rotate(-90 14 {(top + bottom) / 2})">accuracy (95% CI)</text>')
    front = sorted((p for p in shown if getattr(p, front_attr)), key=lambda p: getattr(p, attr))
    if len(front) > 1:
        line = " ".join(f"{sx(getattr(p, attr)):.1f},{sy(p.accuracy):.1f}" for p in front)
        parts.append(f'<polyline class="front-line" fill="none" stroke="{FRONT}" stroke-dasharray="4 3" '
                     f'points="{line}"/>')
    clusters: dict[tuple[int, int], list[Point]] = {}  # points drawn on the same pixel share one label
    for point in shown:
        clusters.setdefault((round(sx(getattr(point, attr))), round(sy(point.accuracy))), []).append(point)
    # Labels keep off every marker and the legend (drawn above the frame's top right corner).
    placer = LabelPlacer((left, top, right, bottom),
                         [(right - 160, 0, right, top)] + [(x - 6, y - 6, x + 6, y + 6) for x, y in clusters])
    for point in sorted(shown, key=lambda p: getattr(p, front_attr)):  # front points drawn last, on top
        on = getattr(point, front_attr)
        x, y = sx(getattr(point, attr)), sy(point.accuracy)
        tip = f"{point.label}: accuracy {100 * point.accuracy:.1f}% " \
              f"[{100 * point.ci[0]:.1f}, {100 * point.ci[1]:.1f}], " \
              f"{_fmt(point.tokens_per_s, 1)} tokens/s, {_fmt(point.nfe_per_token, 3)} NFE/token, " \
              f"TPF {_fmt(point.tpf, 2)}, AUP {_fmt(point.aup, 1) if point.aup is not None else 'undefined'}"
        parts.append(
            f'<a href="{escape(run_link(point))}" class="point {"front" if on else "dominated"}" '
            f'data-run="{escape(point.run.key)}" data-label="{escape(point.label)}"><title>{escape(tip)}</title>'
            f'<line x1="{x:.1f}" y1="{sy(point.ci[0]):.1f}" x2="{x:.1f}" y2="{sy(point.ci[1]):.1f}" '
            f'stroke="{BAR}" stroke-width="1.5"/>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{FRONT if on else "#fff"}" '
            f'stroke="{FRONT if on else DOMINATED}" stroke-width="1.8"/></a>')
    labels, unplaced = [], []
    for (x, y), members in sorted(clusters.items(),
                                  key=lambda kv: (not any(getattr(p, front_attr) for p in kv[1]), kv[0])):
        on = any(getattr(p, front_attr) for p in members)
        # A shared pixel names its first point and counts the rest (each point's tooltip names it).
        text = members[0].label + (f" (+{len(members) - 1} same)" if len(members) > 1 else "")
        spot = placer.place(text, x, y)
        if spot is None:
            unplaced.append(text)
            continue
        if spot.leader:  # a label moved away from its marker says whose it is with a line
            ex, ey = leader_end(spot.box, x, y)
            parts.append(f'<line class="leader" x1="{x:.1f}" y1="{y:.1f}" x2="{ex:.1f}" y2="{ey:.1f}" '
                         'stroke="#495057" stroke-width="0.8" stroke-dasharray="2 2"/>')
        labels.append(f'<text class="point-label" x="{spot.x:.1f}" y="{spot.y:.1f}" font-size="{FONT_SIZE}" '
                      f'font-family="{FONT_FAMILY}" '
                      f'text-anchor="{spot.anchor}" fill="{"#1d2230" if on else "#6b7280"}">{escape(text)}</text>')
    parts += labels
    parts.append(f'<circle cx="{right - 150}" cy="{top - 10}" r="4" fill="{FRONT}"/>'
                 f'<text x="{right - 142}" y="{top - 6}" font-size="11" fill="#222">front</text>'
                 f'<circle cx="{right - 98}" cy="{top - 10}" r="4" fill="#fff" stroke="{DOMINATED}" '
                 'stroke-width="1.5"/>'
                 f'<text x="{right - 90}" y="{top - 6}" font-size="11" fill="#222">dominated</text></svg>')
    if unplaced:  # no free spot in the plot: named under it rather than drawn over another label
        return (f'<figure class="chart">{"".join(parts)}<figcaption class="unlabelled">Not labelled in the '
                f'plot (no free spot; hover the point): {escape(", ".join(unplaced))}</figcaption></figure>')
    return "".join(parts)


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def charts(frontier: Frontier) -> str:
    return ('<div class="charts">'
            + scatter(frontier.points, "tokens_per_s", "generated tokens per second", "front_speed", "higher")
            + scatter(frontier.points, "nfe_per_token", "forward passes (NFE) per generated token", "front_nfe",
                      "lower")
            + "</div>")


def settings_line(frontier: Frontier) -> str:
    s = frontier.shared
    data = ", ".join(f"{b} n={n}" for b, n in s["benchmarks"].items())
    return (f"{data} · gen_length {s['gen_length']} · block_length {s['block_length']} · T {s['temperature']:g} · "
            f"batch {s['batch_size']} · {s['device'] or 'device unrecorded'}: {s['machine']}")


def table(frontier: Frontier) -> str:
    reference = frontier.reference
    head = ("<tr><th>strategy</th><th>decoder</th><th>accuracy</th><th>95% CI</th><th>n</th><th>tokens/s</th>"
            f"<th>× {escape(reference.label) if reference else 'reference'}</th><th>NFE/token</th>"
            '<th title="generated (canvas) tokens per forward pass">TPF</th>'
            '<th title="accuracy under parallelism (d3LLM): see below the table">AUP</th>'
            "<th>front (speed)</th><th>front (NFE)</th><th>run</th></tr>")
    rows = []
    for p in frontier.points:
        ratio = (p.tokens_per_s / reference.tokens_per_s
                 if reference and reference.tokens_per_s and p.tokens_per_s is not None else None)
        rows.append(
            f'<tr data-run="{escape(p.run.key)}"><td class="strategy">{breakable(p.label)}</td>'
            f'<td class="decoder">{breakable(p.run.record.decoder.name if p.run.record.decoder else "–")}</td>'
            f'<td class="acc">{100 * p.accuracy:.1f}%</td><td>[{100 * p.ci[0]:.1f}, {100 * p.ci[1]:.1f}]</td>'
            f'<td>{p.n}</td><td class="tps">{_fmt(p.tokens_per_s, 1)}</td><td>{_fmt(ratio, 2)}</td>'
            f'<td class="nfe">{_fmt(p.nfe_per_token, 3)}</td><td class="tpf">{_fmt(p.tpf, 2)}</td>{aup_cell(p)}'
            f'<td>{"yes" if p.front_speed else ""}</td>'
            f'<td>{"yes" if p.front_nfe else ""}</td>'
            f'<td class="run"><a href="{escape(run_link(p))}">{breakable(p.run.record.run_id)}</a></td></tr>')
    return (f'<div class="table-wrap"><table class="frontier-table"><thead>{head}</thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>{aup_legend(frontier)}')


def breakable(text: str) -> str:
    """Escaped ``text`` that may wrap after ``:``, ``_`` and ``/`` (decoder names, run ids), so a long
    name wraps in its cell instead of widening the table past the page."""
    return "".join(escape(c) + ("<wbr>" if c in ":_/" else "") for c in text)


def aup_cell(point: Point) -> str:
    """The AUP (the mean over the benchmarks), each benchmark's in the tooltip; undefined with its reason."""
    if point.aup is None:
        return f'<td class="aup undefined" title="{escape(point.aup_note or "")}">undefined</td>'
    each = "; ".join(f"{b}: {s.aup:.2f}" for b, s in point.benchmarks.items())
    return f'<td class="aup" title="{escape(each)}">{point.aup:.1f}</td>'


def aup_legend(frontier: Frontier) -> str:
    reference = frontier.reference.label if frontier.reference else "the reference"
    pool = ", ".join(f"{b} {v:.1f}%" for b, v in frontier.y_max.items())
    return ('<p class="legend aup-legend">TPF: canvas tokens (gen_length per generation) per forward pass '
            "(DARE's NFE). AUP: d3LLM's accuracy under parallelism, in TPF × percentage points, on the curve "
            f"from the reference ({escape(reference)}) to the strategy; quality weight W(y) = "
            f"min(exp(−3 (1 − y / y_max)), 1) with y_max the best accuracy of this group ({escape(pool)}); "
            "undefined when the strategy ends more than 5 points below the reference (hover for the reason); "
            "with several benchmarks, the mean of theirs.</p>")


def _page(title: str, nav: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n<title>{escape(title)}</title>\n'
            f'<link rel="icon" href="data:,">\n<link rel="stylesheet" href="../assets/style.css">\n</head>\n'
            f'<body class="frontier">\n<header><h1>{escape(title)}</h1><nav class="frontier-nav">{nav}</nav></header>\n'
            f'<main>\n{body}\n</main>\n</body>\n</html>\n')


def write_pages(site: Path, frontiers: list[Frontier]) -> list[dict[str, str]]:
    """Write every (model, suite) page and the overview; return ``[{"title", "href"}]`` for the index."""
    pages: dict[str, list[Frontier]] = {}
    for frontier in frontiers:
        pages.setdefault(page_name(frontier.shared["model"], frontier.shared["suite"]), []).append(frontier)
    if not pages:
        return []
    (site / "frontier").mkdir(parents=True, exist_ok=True)
    nav = '<a href="../index.html">← leaderboard</a> · <a href="index.html">all frontiers</a>'
    links, overview = [], []
    for name, group in sorted(pages.items()):
        title = f"{group[0].shared['model']} · {group[0].shared['suite']}"
        sections = "\n".join(
            f'<section class="frontier-group" id="g-{f.key}"><h2>{escape(settings_line(f))}</h2>'
            f'{charts(f)}{table(f)}</section>'
            for f in group)
        body = f'<p class="legend">{escape(RULE)}</p>\n{sections}'
        (site / name).write_text(_page(f"Accuracy-speed frontier: {title}", nav, body), encoding="utf-8")
        href = name.removeprefix("frontier/")
        overview.append(f'<section class="frontier-group"><h2><a href="{escape(href)}">{escape(title)}</a></h2>'
                        + "".join(f'<p class="legend">{escape(settings_line(f))}</p>{charts(f)}' for f in group)
                        + "</section>")
        links.append({"title": title, "href": name})
    body = f'<p class="legend">{escape(RULE)}</p>\n' + "\n".join(overview)
    (site / "frontier" / "index.html").write_text(
        _page("Accuracy-speed frontiers of decoding strategies", '<a href="../index.html">← leaderboard</a>', body),
        encoding="utf-8")
    return links
