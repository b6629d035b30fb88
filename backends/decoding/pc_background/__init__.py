"""PC-Sampler's background token frequencies p_bg: the tables DARE ships, how a run picks one, what it records.

PC-Sampler (:mod:`..pc_sampler`) down-weights tokens that are frequent in ordinary text by -log p_bg(token).
The authors' tables (NEUIR/PC-Sampler@8b106b0, data/baseline/) were counted over a corpus that holds evaluation
sets, so DARE ships its own, counted by :mod:`.build` over a declared corpus without any evaluation data
(README.md beside this file): one JSON table per tokenizer, found by :func:`tokenizer_sha256`.

``pc_background`` chooses: ``shipped`` (DARE's table for the model's tokenizer; a ConfigError where DARE ships
none), ``none`` (every token 1/V: only the position decay is left) or the path of a table in DARE's or the
authors' format (``{"num_token": N, "p_baseline_dict": {"<id>": count}}``; unseen ids 1/N). A table that names
its tokenizer must name the model's, and no table may hold an id the model's tokenizer lacks. The plan binds
the sha256 of the file used into the options (``pc_background_sha256``): run.json records it and the
generation cache keys it; set by hand, it pins the table.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from dare.harness.errors import ConfigError

log = logging.getLogger(__name__)

TABLES_DIR = Path(__file__).resolve().parent
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


def resolve(choice: str, tok: Any) -> Table | None:
    """The table ``pc_background=choice`` names for tokenizer ``tok`` (None for ``none``), checked against it."""
    if choice == "none":
        return None
    digest = tokenizer_sha256(tok)
    if choice == "shipped":
        path = shipped_tables().get(digest)
        if path is None:
            names = ", ".join(p.stem for p in shipped_tables().values())
            raise ConfigError(f"pc_background=shipped: DARE ships no PC-Sampler background table for this model's "
                              f"tokenizer (sha256 {digest[:12]}; tables ship for {names}); build one with `python -m "
                              "dare.backends.decoding.pc_background.build --tokenizer CHECKPOINT --out FILE` and "
                              "pass pc_background=FILE, or pass pc_background=none (no table: not the paper's method)")
        return read_table(path)
    table = read_table(Path(choice).expanduser())
    if table.tokenizer_sha256 not in (None, digest):
        raise ConfigError(f"pc_background={choice!r} was counted with another tokenizer (sha256 "
                          f"{table.tokenizer_sha256[:12]}) than this model's ({digest[:12]}); build a table for this "
                          "tokenizer with python -m dare.backends.decoding.pc_background.build")
    _check_ids(table, len(tok), choice)
    if table.sha256 in AUTHORS:
        log.warning("pc_background is the authors' table %s; its corpus includes evaluation sets (their README), "
                    "so scores on those sets may be inflated", AUTHORS[table.sha256])
    return table


def _check_ids(table: Table, vocab: int, choice: str) -> None:
    past = max(table.counts, default=-1)
    if past >= vocab:
        raise ConfigError(f"pc_background={choice!r} holds token id {past}, past this model's vocabulary of {vocab}: "
                          "it was counted with another tokenizer")


def bind(opts: Any, tok: Any) -> Any:
    """``opts`` with ``pc_background_sha256`` set to the file ``opts.pc_background`` resolves to for ``tok``
    (None without a table); a pinned sha256 that differs is a ConfigError."""
    table = resolve(opts.pc_background, tok)
    found = table.sha256 if table is not None else None
    if opts.pc_background_sha256 not in (None, found):
        raise ConfigError(f"pc_background_sha256={opts.pc_background_sha256} is pinned, but "
                          f"pc_background={opts.pc_background!r} is {found or 'no table'} for this model")
    return opts.model_copy(update={"pc_background_sha256": found})


@lru_cache(maxsize=8)
def frequencies(choice: str, pinned: str | None, tok: Any, vocab: int) -> torch.Tensor:
    """p_bg as a (vocab,) float64 vector (``vocab``: the logits' width) for ``pc_background=choice`` under ``tok``:
    counts / N, unseen ids 1/N; 1/vocab everywhere for ``none``. The decoder calls this each step, hence the
    cache."""
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
