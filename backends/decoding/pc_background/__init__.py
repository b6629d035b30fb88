"""PC-Sampler's background token frequencies p_bg: the declared corpus's table for a tokenizer, how a run
picks one, what it records.

PC-Sampler (:mod:`..pc_sampler`) down-weights tokens that are frequent in ordinary text by -log p_bg(token).
The authors' tables (NEUIR/PC-Sampler@8b106b0, data/baseline/) were counted over a corpus that holds evaluation
sets, so DARE counts its own with :mod:`.build` over a declared corpus without any evaluation data (README.md
beside this file): one JSON table per tokenizer, found by :func:`tokenizer_sha256`.

``pc_background`` chooses: ``declared`` (the declared corpus's table for the model's tokenizer: the one DARE
ships, else built once at plan time into the run's cache directory, ``pc-background/``; a ConfigError where
the corpus cannot be read), ``none`` (every token 1/V: only the position decay is left) or the path of a table
in DARE's or the authors' format (``{"num_token": N, "p_baseline_dict": {"<id>": count}}``; unseen ids 1/N).
A table that names its tokenizer must name the model's, and no table may hold an id the model's tokenizer
lacks. The plan binds the sha256 of the file used into the options (``pc_background_sha256``): run.json records
it and the generation cache keys it; set by hand, it pins the table.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from dare.harness.cache import default_cache_root
from dare.harness.errors import ConfigError, DataError

log = logging.getLogger(__name__)

TABLES_DIR = Path(__file__).resolve().parent
#: the folder of a cache directory that holds the tables runs build
CACHE_FOLDER = "pc-background"
#: the ``format`` of the tables :mod:`.build` writes
FORMAT = "dare-pc-background/1"
#: sha256 of the authors' files at NEUIR/PC-Sampler@8b106b0, recognised so a run can warn about what they hold
AUTHORS = {
    "d3added6fe3b1e470a5558d612cc1f52b521415260b76a582b4a367241984749":
        "NEUIR/PC-Sampler@8b106b0 data/baseline/reference_corpus_llada.json (LLaDA tokenizer)",
    "910863033246e63dff61a6969909e65dbee877de195e45115494847522e13201":
        "NEUIR/PC-Sampler@8b106b0 data/baseline/reference_corpus_dream.json (Dream tokenizer)",
}


@dataclass(frozen=True)
class Table:
    """One background table as read: file, its sha256, total N, counts by id, the tokenizer it names (None in
    the authors' format)."""

    path: Path
    sha256: str
    num_token: float
    counts: dict[int, float]
    tokenizer_sha256: str | None


@lru_cache(maxsize=8)  # tokenizer objects hash by identity; serialising a 150k vocabulary takes about a second
def tokenizer_sha256(tok: Any) -> str:
    """sha256 of what decides how plain text encodes: the model type, vocabulary, merges and added tokens of
    the fast tokenizer. Chat templates and file layout are left out (tokenizer.json and vocab.json + merges.txt
    of one tokenizer hash alike), as are normalizer and pre-tokenizer settings, whose serialisation changes
    between ``tokenizers`` versions."""
    data = json.loads(tok.backend_tokenizer.to_str())
    model = data["model"]
    merges = [" ".join(m) if isinstance(m, list) else m for m in model.get("merges") or []]
    identity = {"type": model.get("type"), "vocab": sorted(model.get("vocab", {}).items(), key=lambda kv: kv[1]),
                "merges": merges, "added": sorted((a["id"], a["content"]) for a in data.get("added_tokens") or [])}
    text = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_table(path: Path) -> Table:
    """A table file (DARE's or the authors' format); a one-line ConfigError when it is not one."""
    try:
        raw = path.read_bytes()
        return _parse(raw, hashlib.sha256(raw).hexdigest(), str(path))
    except OSError as exc:
        raise ConfigError(f"pc_background={str(path)!r} cannot be read ({exc.strerror})") from None


@lru_cache(maxsize=8)
def _parse(raw: bytes, sha256: str, where: str) -> Table:
    try:
        data = json.loads(raw)
        counts = {int(k): float(v) for k, v in data["p_baseline_dict"].items()}
        return Table(Path(where), sha256, float(data["num_token"]), counts, data.get("tokenizer_sha256"))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"pc_background={where!r} is not a readable background file ({exc!r}); give a JSON "
                          '{"num_token": N, "p_baseline_dict": {"<token id>": count}}') from None


@lru_cache(maxsize=1)
def shipped_tables() -> dict[str, Path]:
    """The shipped tables by the sha256 of the tokenizer they were counted with."""
    out = {}
    for path in sorted(TABLES_DIR.glob("*.json")):
        out[read_table(path).tokenizer_sha256] = path
    return out


#: tokenizer sha256 -> the table built (or found built) for it in this process: the decoder's lookup at run time
_BUILT: dict[str, Path] = {}


def resolve(choice: str, tok: Any, cache_dir: Path | None = None) -> Table | None:
    """The table ``pc_background=choice`` names for tokenizer ``tok`` (None for ``none``), checked against it.
    ``declared`` builds the table into ``cache_dir`` (None: the one this process built it into, else
    :func:`~dare.harness.cache.default_cache_root`) where none ships for ``tok``."""
    if choice == "none":
        return None
    digest = tokenizer_sha256(tok)
    if choice == "declared":
        return read_table(shipped_tables().get(digest) or built_table(tok, cache_dir))
    table = read_table(Path(choice).expanduser())
    if table.tokenizer_sha256 not in (None, digest):
        raise ConfigError(f"pc_background={choice!r} was counted with another tokenizer (sha256 "
                          f"{table.tokenizer_sha256[:12]}) than this model's ({digest[:12]}); pass "
                          "pc_background=declared, or build a table for this tokenizer with python -m "
                          "dare.backends.decoding.pc_background.build")
    _check_ids(table, len(tok), choice)
    if table.sha256 in AUTHORS:
        log.warning("pc_background is the authors' table %s; its corpus includes evaluation sets (their README), "
                    "so scores on those sets may be inflated", AUTHORS[table.sha256])
    return table


def built_table(tok: Any, cache_dir: Path | None = None) -> Path:
    """The declared corpus's table for ``tok`` in ``cache_dir/pc-background/``, built there on first use
    (:func:`.build.build` with :func:`.build.run_label` and :data:`.build.RUN_BUILT`, the bytes ``build.py``
    writes with those) and reused after; a one-line ConfigError where the corpus cannot be read."""
    from . import build  # imports this module

    digest = tokenizer_sha256(tok)
    if cache_dir is None and digest in _BUILT and _BUILT[digest].is_file():
        return _BUILT[digest]
    path = Path(cache_dir if cache_dir is not None else default_cache_root()) / CACHE_FOLDER / build.cache_name(digest)
    if not _usable(path, digest):
        began = time.perf_counter()
        try:
            data = build.build(tok, build.run_label(digest), build.RUN_BUILT)
        except DataError as exc:
            raise ConfigError(f"pc_background=declared: no table ships for this model's tokenizer (sha256 "
                              f"{digest[:12]}) and the declared corpus to build one cannot be read: {exc}. Pass "
                              "--set extra='{pc_background: none}' (not the paper's method) or a table file, or "
                              "build one with `python -m dare.backends.decoding.pc_background.build --tokenizer "
                              "CHECKPOINT --stdlib CPYTHON-3.11.7/Lib --out FILE`") from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
            partial.write_bytes(data)
            os.replace(partial, path)  # whole or absent, also with another run building beside this one
        except OSError as exc:
            raise ConfigError(f"pc_background=declared: cannot write the table built for this model's tokenizer "
                              f"to {path} ({exc.strerror}); pass a writable --cache-dir") from None
        log.info("pc_background=declared: built the background table for this model's tokenizer (sha256 %s; "
                 "none ships) from the declared corpus in %.1f s: %s (sha256 %s)", digest[:12],
                 time.perf_counter() - began, path, hashlib.sha256(data).hexdigest())
    _BUILT[digest] = path
    return path


def _usable(path: Path, digest: str) -> bool:
    """A table built earlier for this tokenizer (a file that is not one is built over)."""
    try:
        return read_table(path).tokenizer_sha256 == digest
    except ConfigError:
        return False


def _check_ids(table: Table, vocab: int, choice: str) -> None:
    past = max(table.counts, default=-1)
    if past >= vocab:
        raise ConfigError(f"pc_background={choice!r} holds token id {past}, past this model's vocabulary of {vocab}: "
                          "it was counted with another tokenizer")


def bind(opts: Any, tok: Any, cache_dir: Path | None = None) -> Any:
    """``opts`` with ``pc_background_sha256`` set to the file ``opts.pc_background`` resolves to for ``tok``
    (None without a table; ``declared`` builds into ``cache_dir`` where none ships); a pinned sha256 that
    differs is a ConfigError."""
    table = resolve(opts.pc_background, tok, cache_dir)
    found = table.sha256 if table is not None else None
    if opts.pc_background_sha256 not in (None, found):
        raise ConfigError(f"pc_background_sha256={opts.pc_background_sha256} is pinned, but "
                          f"pc_background={opts.pc_background!r} is {found or 'no table'} for this model")
    return opts.model_copy(update={"pc_background_sha256": found})


@lru_cache(maxsize=8)
def frequencies(choice: str, pinned: str | None, tok: Any, vocab: int) -> torch.Tensor:
    """p_bg as a (vocab,) float64 vector (``vocab``: the logits' width) for ``pc_background=choice`` under ``tok``:
    counts / N, unseen ids 1/N; 1/vocab everywhere for ``none``. The decoder calls this each step, hence the
    cache; a table built for ``declared`` is the one :func:`bind` built in this process."""
    table = resolve(choice, tok)
    found = table.sha256 if table is not None else None
    if pinned not in (None, found):
        raise ConfigError(f"pc_background_sha256={pinned} is pinned, but pc_background={choice!r} is now "
                          f"{found or 'no table'}")
    if table is None:
        return torch.full((vocab,), 1.0 / vocab, dtype=torch.float64)
    _check_ids(table, vocab, choice)
    freq = torch.full((vocab,), 1.0 / table.num_token, dtype=torch.float64)
    if table.counts:
        ids = torch.tensor(list(table.counts))
        freq[ids] = torch.tensor(list(table.counts.values()), dtype=torch.float64) / table.num_token
    return freq
