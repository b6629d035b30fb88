"""Writing the static site: page, assets, data files, and the atomic swap into ``--out``.

Layout of a site::

    index.html                 the page (title, script tags and links to the frontier pages filled in)
    frontier/*.html            accuracy-speed frontiers per (model, suite), static SVG (frontier_page.py)
    training/index.html        training curves per algorithm, mean and band over seeds (training_page.py)
    assets/*.js, style.css     package data from dare/leaderboards/assets, copied verbatim
    data/index.js              DARE.register("index", ...): every suite's rows and cells (no samples)
    data/runs/<run>.js         one run's full record and training curve charts (loaded on demand)
    data/samples/<run>/<b>.js  one cell's samples (loaded on demand by the viewer)
    data/pairs/<suite>/<c>.js  one column's pair data, linear in the rows (pairdata.py): per-item values,
                               resampled totals; the page pairs a chosen baseline from them (assets/pairs.js)
    data/pairs/<row>.js        the build's own --baseline row's pairs, precomputed (the default view)
    leaderboard.csv/.json      exports

Data files are JavaScript calling ``DARE.register`` rather than JSON read with ``fetch()``: a
``<script src>`` works from ``file://``, ``fetch`` does not.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from dare.harness.errors import InputError

from .samples import register_call

log = logging.getLogger(__name__)

MARKER = ".dare-leaderboard"
SCRIPTS = ("core.js", "pairs.js", "table.js", "viewer.js")


def write_data(site: Path, relative: str, kind: str, key: str, payload: Any) -> int:
    """Write ``DARE.register(kind, key, payload);`` to ``site/relative``; return its size in bytes."""
    path = site / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    text = register_call(kind, key) + body + ");\n"
    path.write_text(text, encoding="utf-8")
    return len(text.encode("utf-8"))


def write_page(site: Path, title: str, frontiers: list[dict[str, str]] | None = None,
               training: dict[str, str] | None = None) -> int:
    """Copy the assets and write index.html; return the page's size in bytes.

    ``frontiers``: ``[{"title", "href"}]`` of the frontier pages, linked from the header; ``training``:
    ``{"title", "href"}`` of the training page, or None.
    """
    assets = resources.files("dare.leaderboards.assets")
    (site / "assets").mkdir(parents=True, exist_ok=True)
    for entry in assets.iterdir():
        if entry.name.endswith((".js", ".css")):
            (site / "assets" / entry.name).write_bytes(entry.read_bytes())
    template = (assets / "index.html").read_text(encoding="utf-8")
    scripts = "\n".join(f'<script src="assets/{name}"></script>' for name in SCRIPTS[:1])
    scripts += '\n<script src="data/index.js"></script>\n'
    scripts += "\n".join(f'<script src="assets/{name}"></script>' for name in SCRIPTS[1:])
    links = "".join(f' <a href="{escape(f["href"])}">{escape(f["title"])}</a>' for f in frontiers or [])
    nav = ('<nav id="frontiers" aria-label="accuracy-speed frontiers">Accuracy-speed frontiers: '
           f'<a href="frontier/index.html">all</a>{links}</nav>')
    page = template.replace("{{TITLE}}", escape(title)).replace("{{SCRIPTS}}", scripts)
    if training:
        nav = (nav if frontiers else "") + (f'<nav id="training" aria-label="training curves"><a href="'
                                            f'{escape(training["href"])}">Training curves per algorithm</a></nav>')
    page = page.replace("{{FRONTIERS}}", nav if frontiers or training else "")
    (site / "index.html").write_text(page, encoding="utf-8")
    (site / MARKER).write_text("built by dare-leaderboard; the whole folder is replaced on rebuild\n")
    return len(page.encode("utf-8"))


def staging_dir(out: Path) -> Path:
    """An empty folder beside ``out`` to build into, so a failed build never leaves half a site."""
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; pass a directory for the site")
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise InputError(f"--out {out} is a non-empty folder that is not a dare leaderboard; "
                         "pass an empty or new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".{out.name}.building-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    return stage


def publish(stage: Path, out: Path) -> None:
    """Replace ``out`` by the finished ``stage`` (rename, so readers see the old or the new site)."""
    out = out.resolve()
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(old)
    stage.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
